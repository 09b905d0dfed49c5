//! Background shells: `Bash` with `run_in_background`, `BashOutput` and `KillShell`.

use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::exec::LocalExecEnv;
use noeta_core::extension::View;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use serde_json::{Value, json};

use crate::common::{Ws, call, run_in};

fn arbitrary() -> Value {
    json!({ "shell_mode": "arbitrary" })
}

fn background(command: &str) -> (String, Value) {
    call(
        "Bash",
        json!({ "command": command, "run_in_background": true }),
    )
}

fn output(id: &str, extra: Value) -> (String, Value) {
    let mut input = json!({ "bash_id": id, "block": true, "timeout": 10000 });
    if let (Some(map), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        map.extend(extra.clone());
    }
    call("BashOutput", input)
}

#[test]
fn a_background_shell_returns_at_once_and_its_output_is_read_later() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            background("echo start; sleep 0.3; echo end >&2"),
            output("bash_1", json!({})),
            output("bash_1", json!({})),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[0],
        (
            "Started `bash_1` in the background. Read its output with BashOutput (bash_id `bash_1`); stop it with KillShell.".to_owned(),
            false
        )
    );
    assert_eq!(
        results[1],
        (
            "`bash_1`: exited with code 0; new output:\nstart\nend".to_owned(),
            false
        )
    );
    assert_eq!(
        results[2],
        (
            "`bash_1`: exited with code 0; no new output".to_owned(),
            false
        )
    );
    assert_eq!(run.state()["jobs"], json!(["bash_1"]));
    assert_eq!(
        run.records("shell_background"),
        [json!({ "id": "bash_1", "command": "echo start; sleep 0.3; echo end >&2", "cwd": "." })]
    );
}

#[test]
fn a_filter_keeps_the_matching_lines() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            background("printf 'a1\\nb2\\na3\\n'"),
            output("bash_1", json!({ "filter": "^a" })),
            output("bash_1", json!({ "filter": "(" })),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[1].0,
        "`bash_1`: exited with code 0; new output:\na1\na3"
    );
    assert!(
        results[2]
            .0
            .starts_with("BashOutput: `filter` is not a valid regular expression"),
        "{results:?}"
    );
}

#[test]
fn kill_shell_stops_the_shell_and_what_it_started() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            background("sh -c 'sleep 30' & wait"),
            call("KillShell", json!({ "shell_id": "bash_1" })),
            output("bash_1", json!({})),
            call("KillShell", json!({ "shell_id": "bash_1" })),
        ],
    );
    let results = run.results();
    assert_eq!(results[1], ("Stopped `bash_1` (killed)".to_owned(), false));
    assert_eq!(results[2].0, "`bash_1`: killed; no new output");
    assert_eq!(results[3].0, "`bash_1` had already ended (killed)");
}

#[test]
fn unknown_ids_name_what_was_started_and_at_most_eight_run_at_once() {
    let ws = Ws::new();
    let mut calls = vec![call("BashOutput", json!({ "bash_id": "bash_9" }))];
    calls.extend((0..9).map(|_| background("sleep 5")));
    calls.push(call("KillShell", json!({ "shell_id": "bash_12" })));
    calls.extend((1..=8).map(|i| call("KillShell", json!({ "shell_id": format!("bash_{i}") }))));
    let run = run_in(Some(&ws), arbitrary(), &calls);
    let results = run.results();
    assert_eq!(
        results[0],
        (
            "BashOutput: no background shell `bash_9`: none was started in this task".to_owned(),
            true
        )
    );
    assert_eq!(
        results[8].0,
        "Started `bash_8` in the background. Read its output with BashOutput (bash_id `bash_8`); stop it with KillShell."
    );
    assert_eq!(
        results[9],
        (
            "Bash: 8 background shells are already running in this task; stop one with KillShell first".to_owned(),
            true
        )
    );
    assert!(
        results[10]
            .0
            .starts_with("KillShell: no background shell `bash_12` (started: bash_1, bash_2,"),
        "{results:?}"
    );
    assert!(
        results[11..]
            .iter()
            .all(|(text, _)| text.starts_with("Stopped `bash_")),
        "{results:?}"
    );
}

#[test]
fn allowlist_mode_runs_listed_programs_in_the_background_but_not_cd() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        json!({ "shell_allowlist": ["echo"] }),
        &[
            background("echo 'from the background'"),
            output("bash_1", json!({})),
            background("cd /tmp"),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[1].0,
        "`bash_1`: exited with code 0; new output:\nfrom the background"
    );
    assert_eq!(results[2].0, "Bash: `cd` cannot run in the background");
}

#[test]
fn a_shell_from_a_worker_that_stopped_is_named_as_gone() {
    let ws = Ws::new();
    let step = |name: &str, input: Value| json!({ "calls": [{ "name": name, "input": input }] });
    let turns = json!({ "turns": [
        step("Bash", json!({ "command": "sleep 5", "run_in_background": true })),
        { "text": "started" },
        step("BashOutput", json!({ "bash_id": "bash_1" })),
        { "text": "done" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    let rt = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
    .with_exec_env(Arc::new(LocalExecEnv::new(ws.root())));
    let task = TaskId::new("moved").unwrap();
    let first = crate::common::session(arbitrary()).unwrap();
    block_on(rt.create(&first, &task, "start it")).unwrap();
    block_on(rt.run(&first, &task)).unwrap();
    // Another worker (a new session, with its own jobs) takes the next turn.
    let second = crate::common::session(arbitrary()).unwrap();
    block_on(rt.send(&second, &task, "how is it going?")).unwrap();
    block_on(rt.run(&second, &task)).unwrap();
    let state = block_on(rt.load(&second, &task)).unwrap();
    let last = state
        .core
        .messages
        .iter()
        .rfind(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(
        last.text,
        "BashOutput: `bash_1` ran in a worker that has since stopped; its process and output are gone"
    );
    assert!(last.is_error);
}

#[test]
fn unread_output_past_a_mebibyte_is_counted_as_dropped() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            background("head -c 1100000 /dev/zero | tr '\\0' c"),
            output("bash_1", json!({ "filter": "^x" })),
        ],
    );
    let (text, is_error) = run.last();
    assert!(!is_error, "{text}");
    assert_eq!(
        text,
        "`bash_1`: exited with code 0; no new output\n[51424 bytes of output were dropped before they were read]"
    );
}

fn ending_with_turn() -> Value {
    json!({ "shell_mode": "arbitrary", "background_ends_with_turn": true })
}

/// Whether process `pid` is gone (5 s at most to go).
fn gone(pid: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let alive = std::process::Command::new("kill")
            .args(["-0", pid])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        if !alive {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(unix)]
#[test]
fn with_background_ends_with_turn_the_turns_end_kills_its_shells() {
    let ws = Ws::new();
    let run = crate::common::run_turns(
        Some(&ws),
        ending_with_turn(),
        &[
            &[
                background("sleep 30 & echo $! > sleeper.pid; wait"),
                call("Bash", json!({ "command": "sleep 0.3" })),
            ],
            &[output("bash_1", json!({}))],
        ],
        |_| {},
    );
    assert_eq!(
        run.results()[0].0,
        "Started `bash_1` in the background. Read its output with BashOutput (bash_id `bash_1`); stop it with KillShell.\nIt will be killed when this turn ends (background_ends_with_turn is on)."
    );
    let pid = ws.get("sleeper.pid").trim().to_owned();
    assert!(gone(&pid), "the shell's child {pid} still runs");
    assert_eq!(
        run.records("shell_killed"),
        [json!({ "id": "bash_1", "status": "killed when the turn ended" })]
    );
    assert_eq!(run.last().0, "`bash_1`: killed; no new output");
}

#[cfg(unix)]
#[test]
fn by_default_background_shells_outlive_the_turn() {
    let ws = Ws::new();
    let run = crate::common::run_turns(
        Some(&ws),
        arbitrary(),
        &[
            &[background("sleep 30")],
            &[
                call("BashOutput", json!({ "bash_id": "bash_1" })),
                call("KillShell", json!({ "shell_id": "bash_1" })),
            ],
        ],
        |_| {},
    );
    let results = run.results();
    assert_eq!(results[1].0, "`bash_1`: running; no new output");
    assert_eq!(
        run.records("shell_killed"),
        [json!({ "id": "bash_1", "status": "killed" })]
    );
}

#[cfg(unix)]
#[test]
fn a_refused_end_kills_only_the_shells_not_killed_yet() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use noeta_core::extension::{Extension, HookResult};

    /// Refuses the first end of the turn.
    struct NotYet(AtomicUsize);
    #[async_trait]
    impl Extension for NotYet {
        fn name(&self) -> &str {
            "not-yet"
        }
        async fn before_finish(&self, _v: &View<'_>) -> HookResult<Option<String>> {
            Ok((self.0.fetch_add(1, Ordering::SeqCst) == 0).then(|| "Not yet.".to_owned()))
        }
    }

    let ws = Ws::new();
    let step = |input: Value| json!({ "calls": [{ "name": "Bash", "input": input }] });
    let turns = json!({ "turns": [
        step(json!({ "command": "sleep 30", "run_in_background": true })),
        { "text": "done?" },
        step(json!({ "command": "sleep 31", "run_in_background": true })),
        { "text": "done" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    let rt = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
    .with_exec_env(Arc::new(LocalExecEnv::new(ws.root())));
    let mut session = crate::common::session(ending_with_turn()).unwrap();
    session
        .extensions
        .push(Arc::new(NotYet(AtomicUsize::new(0))));
    let task = TaskId::new("refused").unwrap();
    block_on(rt.create(&session, &task, "go")).unwrap();
    block_on(rt.run(&session, &task)).unwrap();
    let killed: Vec<Value> = block_on(rt.log().read(&task, 0))
        .unwrap()
        .into_iter()
        .filter(|e| e.record.extension == "fs" && e.record.kind == "shell_killed")
        .map(|e| e.record.data.clone())
        .collect();
    assert_eq!(
        killed,
        [
            json!({ "id": "bash_1", "status": "killed when the turn ended" }),
            json!({ "id": "bash_2", "status": "killed when the turn ended" }),
        ]
    );
}
