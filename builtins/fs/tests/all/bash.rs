//! `Bash`: shell modes, the tracked working directory, deadlines, output limits, environment.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Ws, call, run_in, session, tools};

fn arbitrary() -> Value {
    json!({ "shell_mode": "arbitrary" })
}

fn bash(command: &str) -> (String, Value) {
    call("Bash", json!({ "command": command }))
}

#[test]
fn a_command_runs_in_the_workspace_with_both_streams_and_its_exit_code() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha\n");
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            bash("cat a.txt; echo warn >&2"),
            bash("echo out; exit 3"),
            bash("true"),
        ],
    );
    assert_eq!(
        run.results(),
        [
            ("alpha\nwarn".to_owned(), false),
            ("out\nExit code 3".to_owned(), true),
            ("(no output)".to_owned(), false),
        ]
    );
    assert_eq!(
        run.records("shell")[1],
        json!({"command": "echo out; exit 3", "cwd": ".", "status": 3, "timed_out": false})
    );
}

#[test]
fn the_working_directory_carries_over_and_stays_inside_the_workspace() {
    let ws = Ws::new();
    ws.put("sub/inner/f.txt", "x");
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[bash("cd sub/inner"), bash("ls"), bash("cd /"), bash("ls")],
    );
    let results = run.results();
    assert_eq!(results[1], ("f.txt".to_owned(), false));
    assert!(
        results[2]
            .0
            .contains("The command left the workspace (for `/`)"),
        "{results:?}"
    );
    assert_eq!(results[3], ("sub".to_owned(), false));
    assert_eq!(run.state()["cwd"], ".");
}

#[test]
fn a_deadline_kills_the_whole_tree_grandchildren_too() {
    let ws = Ws::new();
    let started = Instant::now();
    // The command starts a child shell, which starts a grandchild that records its pid.
    let tree = "bash -c 'sh -c \"echo \\$\\$ > grandchild.pid; exec sleep 30\" & wait'";
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[call("Bash", json!({ "command": tree, "timeout": 500 }))],
    );
    let (text, is_error) = run.last();
    assert!(is_error, "{text}");
    assert!(
        text.starts_with("Bash: the command timed out after 500 ms and was killed"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid = ws.get("grandchild.pid").trim().to_owned();
    // Gone, or a zombie waiting for a reaper: either way no longer running.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        if stat.is_empty() || state == Some("Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the grandchild {pid} still runs: {stat}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_long_leading_sleep_and_bad_timeouts_are_refused() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            bash("sleep 30 && ls"),
            call("Bash", json!({ "command": "ls", "timeout": 700000 })),
            call("Bash", json!({ "command": "ls", "timeout": "soon" })),
            bash("   "),
        ],
    );
    let results = run.results();
    assert!(
        results[0]
            .0
            .starts_with("Bash: Blocked: a leading `sleep` of 30 s"),
        "{results:?}"
    );
    // The runtime checks input against the schema before the tool runs.
    assert!(
        results[1].0.starts_with(
            "Bash: invalid input — /timeout: 700000 is greater than the maximum of 600000"
        ),
        "{results:?}"
    );
    assert!(
        results[2].0.starts_with("Bash: invalid input — /timeout:"),
        "{results:?}"
    );
    assert_eq!(results[3].0, "Bash: the command is empty");
    assert!(results.iter().all(|(_, is_error)| *is_error));
}

#[test]
fn long_output_is_shortened_in_the_middle() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[bash("head -c 100000 /dev/zero | tr '\\0' a")],
    );
    let (text, is_error) = run.last();
    assert!(!is_error);
    assert!(
        text.contains("\n… [70000 characters elided] …\n"),
        "{}",
        &text[..100]
    );
    assert!(text.chars().count() < 30_100, "{}", text.chars().count());
}

#[test]
fn allowlist_mode_runs_listed_programs_without_a_shell() {
    let ws = Ws::new();
    ws.put("sub/f.txt", "x");
    let run = run_in(
        Some(&ws),
        json!({ "shell_allowlist": ["ls", "echo"] }),
        &[
            bash("echo 'one two' $HOME"),
            bash("rm -rf sub"),
            bash("ls | wc -l"),
            bash("cd sub"),
            bash("ls"),
            bash("cd ../.."),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[0],
        ("one two $HOME".to_owned(), false),
        "no shell expands it"
    );
    assert_eq!(
        results[1].0,
        "Bash: `rm` is not on the shell allowlist (allowed: ls, echo)"
    );
    assert!(
        results[2]
            .0
            .starts_with("Bash: `|` is a shell operator, and shell_mode is `allowlist`"),
        "{results:?}"
    );
    assert_eq!(results[3], ("(working directory: sub)".to_owned(), false));
    assert_eq!(results[4], ("f.txt".to_owned(), false));
    assert!(
        results[5].0.contains("outside the workspace"),
        "{results:?}"
    );
    assert!(ws.path("sub").exists());
}

#[test]
fn the_host_environment_stays_out_unless_inherited() {
    let ws = Ws::new();
    let probe = bash("echo \"[$CARGO_MANIFEST_DIR][$GREETING]\"");
    let settings = json!({ "shell_mode": "arbitrary", "shell_env": { "GREETING": "hi" } });
    let run = run_in(Some(&ws), settings, std::slice::from_ref(&probe));
    assert_eq!(run.last(), ("[][hi]".to_owned(), false));
    let inherit = json!({ "shell_mode": "arbitrary", "shell_env_inherit": true });
    let run = run_in(Some(&ws), inherit, &[probe]);
    assert_eq!(run.last().0, format!("[{}][]", env!("CARGO_MANIFEST_DIR")));
}

#[test]
fn shell_mode_off_mounts_no_bash_and_bad_shell_settings_name_the_field() {
    let s = session(json!({ "shell_mode": "off" })).unwrap();
    assert!(tools(&s).iter().all(|t| t.name() != "Bash"));
    let s = session(Value::Null).unwrap();
    assert!(tools(&s).iter().any(|t| t.name() == "Bash"));
    let err = |settings: Value| match session(settings) {
        Ok(_) => panic!("the session should be refused"),
        Err(err) => err.to_string(),
    };
    assert!(err(json!({ "shell_mode": "sometimes" })).ends_with(
        "settings [plugins.fs] shell_mode: expected `off`, `allowlist` or `arbitrary`, got `\"sometimes\"`"
    ));
    assert!(err(json!({ "shell_allowlist": "ls" })).ends_with(
        "settings [plugins.fs] shell_allowlist: expected a list of strings, got `\"ls\"`"
    ));
    assert!(
        err(json!({ "shell_env": { "N": 1 } }))
            .ends_with("settings [plugins.fs] shell_env.N: expected a string, got `1`")
    );
    assert!(
        err(json!({ "shell_env": "N=1" })).ends_with(
            "settings [plugins.fs] shell_env: expected a table of strings, got `\"N=1\"`"
        )
    );
    assert!(err(json!({ "shell_env_inherit": "yes" })).ends_with(
        "settings [plugins.fs] shell_env_inherit: expected true or false, got `\"yes\"`"
    ));
}

#[test]
fn output_past_the_capture_limit_is_counted_not_kept() {
    let ws = Ws::new();
    // 300 KiB on stdout: 256 KiB are kept, the rest is counted.
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[bash("head -c 307200 /dev/zero | tr '\\0' b")],
    );
    let (text, is_error) = run.last();
    assert!(!is_error);
    // The 45,056 bytes past the limit, and the directory line the shell prints after them.
    let dropped: u64 = text
        .split("\n[")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no dropped count in {}", &text[text.len() - 200..]));
    assert!((45_056..45_056 + 4096).contains(&dropped), "{dropped}");
    assert!(text.contains(" more bytes of output were not captured]\n"));
    assert!(text.ends_with(
        "The output passed the capture limit, so a `cd` in this command was not tracked."
    ));
}

#[test]
fn a_look_alike_directory_mark_in_the_output_cannot_move_the_shell_out() {
    let ws = Ws::new();
    ws.put("sub/f.txt", "x");
    // The command prints what the shell prints after it, then exits before the real one.
    let spoof = r#"printf 'caf\303\251\n\037noeta-cwd:%s/../..\n' "$PWD"; exit 0"#;
    let run = run_in(Some(&ws), arbitrary(), &[bash(spoof), bash("ls")]);
    let results = run.results();
    assert!(
        results[0]
            .0
            .starts_with("café\nThe command left the workspace"),
        "{results:?}"
    );
    assert_eq!(results[1], ("sub".to_owned(), false));
    assert_eq!(run.state()["cwd"], ".");
}

#[test]
fn cd_takes_an_absolute_directory_inside_the_workspace() {
    let ws = Ws::new();
    ws.put("a/x.txt", "x");
    ws.put("b/y.txt", "y");
    let b = ws.root().canonicalize().unwrap().join("b");
    let run = run_in(
        Some(&ws),
        json!({ "shell_allowlist": ["ls"] }),
        &[
            bash("cd a"),
            bash(&format!("cd {}", b.display())),
            bash("ls"),
        ],
    );
    let results = run.results();
    assert_eq!(results[1], ("(working directory: b)".to_owned(), false));
    assert_eq!(results[2], ("y.txt".to_owned(), false));
}
