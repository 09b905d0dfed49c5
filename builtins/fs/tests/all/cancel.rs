//! A cancelled call stops its work: dropping a `Grep` or a ranged `Read` (Ctrl-C, a lost
//! lease, a cancelled task) stops the helper thread doing the search or the read, instead of
//! leaving it to run on, unseen, for as long as the work takes.

use std::future::Future;
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, Instant};

use noeta_core::ToolContext;
use noeta_core::exec::LocalExecEnv;
use serde_json::{Value, json};

use crate::common::{Ws, session, tools};

/// How many of this process's threads are named `name`.
fn threads(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .count()
}

/// Starts `tool` on `input`, lets it work a while, drops the call, and checks that its helper
/// thread (`noeta-<tool>`) stops: at some moment within two seconds none is left (other tests
/// run their own short calls beside this one).
fn stops_when_dropped(ws: &Ws, tool: &str, input: Value) {
    let session = session(Value::Null).unwrap();
    let tool_impl = tools(&session)
        .into_iter()
        .find(|t| t.name() == tool)
        .unwrap();
    let ctx = ToolContext::new("t", "c").with_exec(Arc::new(LocalExecEnv::new(ws.root())));
    let mut call = Box::pin(tool_impl.run(input, &ctx));
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(
        call.as_mut().poll(&mut cx).is_pending(),
        "{tool} ended at once"
    );
    let name = format!("noeta-{tool}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        call.as_mut().poll(&mut cx).is_pending(),
        "{tool} ended too soon for the test"
    );
    assert!(threads(&name) >= 1, "{name} is not running");
    drop(call);
    let deadline = Instant::now() + Duration::from_secs(2);
    while threads(&name) > 0 {
        assert!(
            Instant::now() < deadline,
            "{name} ran on after its call was dropped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_dropped_grep_stops_searching() {
    // Gigabytes to search, in hard links of one file: seconds of work, no disk to speak of.
    let ws = Ws::new();
    let line = "a line of text the search reads through without finding what it wants\n";
    ws.put("big/0.txt", line.repeat(30_000));
    for n in 1..3_000 {
        std::fs::hard_link(ws.path("big/0.txt"), ws.path(&format!("big/{n}.txt"))).unwrap();
    }
    stops_when_dropped(
        &ws,
        "Grep",
        json!({ "pattern": "needle[0-9]+x", "path": "big" }),
    );
}

#[test]
fn a_dropped_ranged_read_stops_reading() {
    // Forty gigabytes, nearly all a hole: a read of one line still hashes the whole file.
    let ws = Ws::new();
    ws.put("huge.txt", "the first line\n");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(ws.path("huge.txt"))
        .unwrap();
    file.set_len(40 << 30).unwrap();
    stops_when_dropped(
        &ws,
        "Read",
        json!({ "file_path": "huge.txt", "offset": 1, "limit": 1 }),
    );
}
