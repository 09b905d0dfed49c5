//! One runner per task: a second process refuses a task another process runs (naming it, or
//! waiting for it with `--wait`), and takes over at once from a process that was killed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

/// A workspace whose model takes `delay_ms` to answer the first turn.
fn slow(delay_ms: u64) -> (CliEnv, String) {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let provider = env.script(json!([
        { "text": "Slow and steady.", "delay_ms": delay_ms },
        { "text": "Again." }
    ]));
    (env, provider)
}

/// Starts `noeta run` in the background; its task id once it said it (the task then exists).
fn start(env: &CliEnv, provider: &str) -> (Child, String) {
    let mut child = env
        .command(&["run", "--provider", provider, "take your time"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = env.run(&["tasks"]);
        if let Some(task) = stdout(&listed)
            .lines()
            .find_map(|l| l.split_whitespace().next().filter(|w| w.contains('-')))
        {
            // The goal is recorded once the task is listed; give the run a moment to claim it.
            std::thread::sleep(Duration::from_millis(300));
            return (child, task.to_owned());
        }
        assert!(Instant::now() < deadline, "the run never created its task");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_process_refuses_a_task_another_runs_naming_it() {
    let (env, provider) = slow(4_000);
    let (first, task) = start(&env, &provider);
    let out = env.run(&["resume", &task, "--provider", &provider]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "task {task} is being run by another process, worker `cli@"
        )) && err.contains(&format!("#{}`", first.id()))
            && err.contains("unless renewed): let it finish, or pass --wait to wait for it"),
        "{err}"
    );
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&first.stdout), "Slow and steady.\n");
}

#[test]
fn with_wait_a_second_process_waits_its_turn() {
    let (env, provider) = slow(2_000);
    let (first, task) = start(&env, &provider);
    let waited = env.run(&["resume", &task, "--wait", "--provider", &provider]);
    let err = stderr(&waited);
    assert!(waited.status.success(), "{err}");
    assert!(
        err.contains(&format!("task {task} is being run by worker `cli@")),
        "{err}"
    );
    assert!(err.contains("; waiting (its lease ends in"), "{err}");
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success());
    // The first finished its turn; the waiting resume found nothing left to do.
    assert!(
        err.contains("nothing to do") || err.contains("turn ended"),
        "{err}"
    );
}

#[test]
fn a_killed_process_is_taken_over_at_once() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    // The first run is killed while its command runs; the resume answers the open call
    // "outcome unknown" and goes on with the next turn at once.
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "sleep 20" } }] },
        { "text": "Carried on." }
    ]));
    let mut first = env
        .command(&[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
            "wait a while",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let task = loop {
        let log = env.run(&["tasks"]);
        let listed = stdout(&log);
        if let Some(task) = listed
            .lines()
            .find_map(|l| l.split_whitespace().next().filter(|w| w.contains('-')))
            && listed.contains("running")
        {
            break task.to_owned();
        }
        if Instant::now() >= deadline {
            // Say what the run and the listing said, not only that nothing came.
            let _ = first.kill();
            let out = first.wait_with_output().unwrap();
            panic!(
                "the run never started its command: `tasks` said {listed:?} ({:?}); the run \
                 ended {} with stdout {:?} and stderr {:?}",
                stderr(&log),
                out.status,
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    let began = Instant::now();
    let out = env.run(&[
        "resume",
        &task,
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
    ]);
    let err = stderr(&out);
    // The killed run held a 60-second lease; its process is gone, so the resume need not wait.
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "took {:?}: {err}",
        began.elapsed()
    );
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("is being run by"), "{err}");
    assert_eq!(stdout(&out), "Carried on.\n");
}
