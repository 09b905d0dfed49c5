//! Every command with its standard output closed under it (`noeta log T | head`) or on a full
//! disk (`> /dev/full`): it ends with the conventional status and never panics.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::process::{Output, Stdio};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

/// 128 + SIGPIPE: what a shell shows for a tool whose reader went away.
const CLOSED_PIPE: i32 = 141;

/// `EX_IOERR`: standard output could not be written for another reason.
const IO_ERROR: i32 = 74;

/// An environment with one finished task; its id.
fn with_a_task() -> (CliEnv, String) {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let provider = env.script(json!([{ "text": "A reply long enough to matter.\n".repeat(400) }]));
    let out = env.run(&["run", "--provider", &provider, "say a lot"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let task = stderr(&out)
        .lines()
        .find_map(|l| {
            l.strip_prefix("task ")
                .map(|r| r.split([' ', ':']).next().unwrap().to_owned())
        })
        .unwrap();
    (env, task)
}

/// Every command that prints to standard output, with its arguments.
fn commands(env: &CliEnv, task: &str) -> Vec<Vec<String>> {
    let provider = env.script(json!([{ "text": "Another long reply.\n".repeat(400) }]));
    let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    vec![
        owned(&["--help"]),
        owned(&["surfaces"]),
        owned(&["surfaces", "--json"]),
        owned(&["plugins", "list"]),
        owned(&["plugins", "list", "--json"]),
        owned(&["plugins", "check", "--resolve"]),
        owned(&["skills", "list"]),
        owned(&["skills", "list", "--json"]),
        owned(&["doctor"]),
        owned(&["tasks"]),
        owned(&["log", task]),
        owned(&["log", task, "--json"]),
        owned(&["mcp", "list"]),
        owned(&["store", "check"]),
        owned(&["store", "check", "--json"]),
        owned(&["store", "salvage", "salvaged.db"]),
        owned(&["run", "--provider", &provider, "again"]),
        owned(&["run", "--json", "--provider", &provider, "again, as JSON"]),
    ]
}

fn run_into(env: &CliEnv, args: &[String], stdout: Stdio) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.command(&args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn no_panic(args: &[String], out: &Output) {
    let err = stderr(out);
    assert_ne!(
        out.status.code(),
        Some(101),
        "`noeta {}` panicked: {err}",
        args.join(" ")
    );
    assert!(
        !err.contains("panicked"),
        "`noeta {}`: {err}",
        args.join(" ")
    );
}

#[test]
fn every_command_with_a_closed_stdout_ends_quietly_with_141() {
    let (env, task) = with_a_task();
    for args in commands(&env, &task) {
        // A pipe whose reading end is gone before the command starts.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = run_into(&env, &args, Stdio::from(writer));
        no_panic(&args, &out);
        assert_eq!(
            out.status.code(),
            Some(CLOSED_PIPE),
            "`noeta {}`: {}",
            args.join(" "),
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("error:"),
            "`noeta {}` ends quietly: {}",
            args.join(" "),
            stderr(&out)
        );
    }
}

#[test]
fn every_command_on_a_full_disk_says_so_once_and_exits_74() {
    let (env, task) = with_a_task();
    for args in commands(&env, &task) {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = run_into(&env, &args, Stdio::from(full));
        no_panic(&args, &out);
        assert_eq!(
            out.status.code(),
            Some(IO_ERROR),
            "`noeta {}`: {}",
            args.join(" "),
            stderr(&out)
        );
        assert_eq!(
            stderr(&out)
                .matches("error: cannot write to standard output: No space left on device")
                .count(),
            1,
            "`noeta {}`: {}",
            args.join(" "),
            stderr(&out)
        );
    }
}

#[test]
fn a_reader_that_stops_early_ends_the_listing_without_a_panic() {
    let (env, task) = with_a_task();
    // `noeta log T | head -c 10`: read a little, then hang up.
    let mut child = env
        .command(&["log", &task])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut head).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    no_panic(&["log".to_owned(), task], &out);
    assert!(
        matches!(out.status.code(), Some(0 | CLOSED_PIPE)),
        "{:?}: {}",
        out.status,
        stdout(&out)
    );
}
