//! Ctrl-C through a real pseudo-terminal kills every command the run started — the shell and
//! what it started — before `noeta` says the run was interrupted: fifty times in a row, no
//! survivor. And however a run ends, no background shell it started outlives `noeta`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use noeta_testkit::cli::CliEnv;
use serde_json::json;

/// Whether process `pid` still runs (a zombie waiting to be reaped does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn ctrl_c_in_a_terminal_kills_the_running_command_and_its_children_fifty_times() {
    let script = Path::new("/usr/bin/script");
    assert!(
        script.exists(),
        "this test needs util-linux `script` (Debian package bsdutils) for a pseudo-terminal"
    );
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": {
            "command": "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait",
            "timeout": 60000
        } }] },
        { "text": "done" }
    ]));
    let noeta = env!("CARGO_BIN_EXE_noeta");
    let line = format!(
        "{noeta} run --store memory: --permission-mode bypassPermissions --provider {provider} 'wait for it'"
    );
    let mut survivors = Vec::new();
    let mut slowest = Duration::ZERO;
    for round in 0..50 {
        let began = Instant::now();
        let (shell, child_file) = (
            env.workspace.join("shell.pid"),
            env.workspace.join("child.pid"),
        );
        let _ = std::fs::remove_file(&shell);
        let _ = std::fs::remove_file(&child_file);
        let mut terminal = std::process::Command::new(script)
            .args(["-qfec", &line, "/dev/null"])
            .current_dir(&env.workspace)
            .env("HOME", &env.home)
            .env("NOETA_KILL_GRACE_MS", "200")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The command has started its child.
        let deadline = Instant::now() + Duration::from_secs(10);
        let (shell_pid, child_pid) = loop {
            if let (Some(s), Some(c)) = (pid_in(&shell), pid_in(&child_file)) {
                break (s, c);
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the command never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // Ctrl-C, typed at the terminal.
        terminal.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while terminal.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "round {round}: noeta did not stop on Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let output = terminal.wait_with_output().unwrap();
        let shown = String::from_utf8_lossy(&output.stdout);
        assert!(
            shown.contains("interrupted"),
            "round {round}: the terminal showed: {shown}"
        );
        // Orphans are reaped by init at once; give it a moment before looking.
        let settle = Instant::now() + Duration::from_millis(500);
        while (alive(shell_pid) || alive(child_pid)) && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(10));
        }
        for pid in [shell_pid, child_pid] {
            if alive(pid) {
                survivors.push((round, pid));
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
        }
        slowest = slowest.max(began.elapsed());
    }
    assert!(survivors.is_empty(), "survived Ctrl-C: {survivors:?}");
    assert!(
        slowest < Duration::from_secs(2),
        "the slowest round took {slowest:?}"
    );
}

/// Waits up to 10 s for both pids `noeta`'s command wrote, naming `case` if it never did.
fn pids_of(dir: &Path, case: &str) -> (u32, u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let (Some(s), Some(c)) = (
            pid_in(&dir.join("shell.pid")),
            pid_in(&dir.join("child.pid")),
        ) {
            return (s, c);
        }
        assert!(
            Instant::now() < deadline,
            "{case}: the background command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_run_that_ends_leaves_no_background_shell_behind_however_it_ends() {
    let start = json!({ "calls": [{ "name": "Bash", "input": {
        "command": "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait",
        "run_in_background": true
    } }] });
    // The next turn waits, in the foreground, until the shell has started its child.
    let started = json!({ "calls": [{ "name": "Bash", "input": {
        "command": "while [ ! -s child.pid ]; do sleep 0.01; done",
        "timeout": 20000
    } }] });
    let cases = [
        (
            "the turn ends",
            json!([start, started, { "text": "started it" }]),
        ),
        (
            "the run fails",
            json!([start, started, { "error": "fatal" }]),
        ),
    ];
    for (case, turns) in cases {
        let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
        let provider = env.script(turns);
        let out = env
            .command(&[
                "run",
                "--store",
                "memory:",
                "--permission-mode",
                "bypassPermissions",
                "--provider",
                &provider,
                "start it and go",
            ])
            .env("NOETA_KILL_GRACE_MS", "200")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (shell, child) = pids_of(&env.workspace, case);
        let settle = Instant::now() + Duration::from_millis(500);
        while (alive(shell) || alive(child)) && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(10));
        }
        let survivors: Vec<u32> = [shell, child].into_iter().filter(|p| alive(*p)).collect();
        for pid in &survivors {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
        assert!(
            survivors.is_empty(),
            "{case}: {survivors:?} outlived `noeta run` ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
