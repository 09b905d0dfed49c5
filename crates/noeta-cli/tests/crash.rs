//! The crash test: `noeta run` is SIGKILLed at spread-out points of a scripted multi-tool task,
//! twenty times, and each task is carried on with `noeta resume --last`. Every task completes,
//! no shell command (not safe to run twice) takes effect twice, and every log is gapless.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

fn noeta(workspace: &Path, home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_noeta"));
    command
        .args(args)
        .env("HOME", home)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn output(workspace: &Path, home: &Path, args: &[&str]) -> Output {
    noeta(workspace, home, args).output().unwrap()
}

fn bash(command: &str) -> Value {
    json!({ "calls": [{ "name": "Bash", "input": { "command": command } }] })
}

/// Three shell commands that each append a line once, with reads and a pause between them.
fn script() -> Value {
    json!({ "turns": [
        bash("echo one >> effects.txt"),
        { "calls": [{ "name": "Read", "input": { "file_path": "effects.txt" } }] },
        bash("sleep 0.25; echo two >> effects.txt"),
        { "calls": [{ "name": "Glob", "input": { "pattern": "*.txt" } }] },
        bash("sleep 0.25; echo three >> effects.txt"),
        { "text": "all done" }
    ]})
}

#[test]
fn a_run_killed_anywhere_is_resumed_to_the_end_with_no_effect_twice_and_no_gap() {
    let root = tempfile::tempdir().unwrap();
    let mut completed = 0;
    let mut killed = 0;
    for round in 0..20u64 {
        let home = root.path().join(format!("home-{round}"));
        let workspace = root.path().join(format!("ws-{round}"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        let script_path = workspace.join("script.json");
        std::fs::write(&script_path, script().to_string()).unwrap();
        let provider = format!("scripted:{}", script_path.display());
        let flags = [
            "--provider",
            provider.as_str(),
            "--permission-mode",
            "bypassPermissions",
        ];

        // Kill points spread over the run: from before the task exists to near its end.
        let mut child = noeta(&workspace, &home, &[&["run"], &flags[..], &["go"]].concat())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(10 + round * 35));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();

        let listed = text(&output(&workspace, &home, &["tasks", "--json"]).stdout);
        let never_started = listed.contains("never started");
        if listed.trim().is_empty() || never_started {
            // Killed before the goal was recorded: there is nothing to resume (`resume` says
            // so); start it afresh.
            if never_started {
                let refused = output(
                    &workspace,
                    &home,
                    &[&["resume", "--last"], &flags[..]].concat(),
                );
                assert!(
                    text(&refused.stderr).contains("there is nothing to resume"),
                    "{}",
                    text(&refused.stderr)
                );
                std::fs::remove_dir_all(workspace.join(".noeta")).unwrap();
            }
            let fresh = output(&workspace, &home, &[&["run"], &flags[..], &["go"]].concat());
            assert!(fresh.status.success(), "{}", text(&fresh.stderr));
        } else {
            let resumed = output(
                &workspace,
                &home,
                &[&["resume", "--last"], &flags[..]].concat(),
            );
            assert!(
                resumed.status.success(),
                "round {round}: {}",
                text(&resumed.stderr)
            );
        }

        let listed: Value = serde_json::from_str(
            text(&output(&workspace, &home, &["tasks", "--json"]).stdout).trim(),
        )
        .unwrap();
        assert_eq!(listed["status"], "turn ended", "round {round}: {listed}");
        let task = listed["id"].as_str().unwrap();
        let log = text(&output(&workspace, &home, &["log", task, "--json"]).stdout);
        let seqs: Vec<u64> = log
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "round {round}: a gap or a duplicate");
        assert!(log.contains("\"all done\""), "round {round}: {log}");

        let effects = std::fs::read_to_string(workspace.join("effects.txt")).unwrap_or_default();
        for line in ["one", "two", "three"] {
            assert!(
                effects.lines().filter(|l| *l == line).count() <= 1,
                "round {round}: `{line}` took effect twice: {effects:?}"
            );
        }
        completed += 1;
    }
    assert_eq!(completed, 20);
    eprintln!("{killed} of 20 runs were killed before they ended");
    assert!(
        killed >= 10,
        "only {killed} of 20 runs were still going when killed"
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
