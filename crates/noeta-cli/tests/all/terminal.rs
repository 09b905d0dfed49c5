//! What a person sees while a task runs, through a pipe (no escape codes at all) and through a
//! pseudo-terminal (colour on, the status line drawn while a tool runs and cleared after it,
//! coloured diffs), each as an `insta` snapshot; `NO_COLOR` and `CLICOLOR_FORCE`; previews
//! with `--verbose`, and `/show N` in chat.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// A task that shows each kind of output: a slow shell command with a long result, a read, an
/// edit, a new file, and a closing reply.
fn session(env: &CliEnv) -> String {
    env.write("notes.txt", "alpha\nbeta\ngamma\n");
    env.script(json!([
        { "text": "Looking around.", "calls": [{ "name": "Bash", "input": { "command": "sleep 1.5; seq 1 12" } }] },
        { "calls": [{ "name": "Read", "input": { "file_path": "notes.txt" } }] },
        { "calls": [{ "name": "Edit", "input": { "file_path": "notes.txt", "old_string": "beta", "new_string": "BETA" } }] },
        { "calls": [{ "name": "Write", "input": { "file_path": "new.txt", "content": "one\ntwo\n" } }] },
        { "text": "All done." }
    ]))
}

/// The variable parts of a run's output made fixed: paths, the task id, the run's time.
fn normalise(env: &CliEnv, text: &str) -> String {
    let text = env.redact(&text.replace("\r\n", "\n"));
    text.lines()
        .map(|line| {
            let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
            for word in &mut words {
                let bare = word.trim_end_matches(':');
                let shape: Vec<usize> = bare.split('-').map(str::len).collect();
                if shape == [8, 6, 4] && bare.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                    *word = word.replace(bare, "[TASK]");
                }
            }
            let line = words.join(" ");
            // `…, 1.5 s` / `…, 812 ms`: the run's time.
            match line.rsplit_once(", ") {
                Some((head, tail)) if tail.ends_with(" s") || tail.ends_with(" ms") => {
                    format!("{head}, [TIME]")
                }
                _ => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_args(provider: &str) -> Vec<String> {
    [
        "run",
        "--store",
        "memory:",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        provider,
        "tidy the notes",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[test]
fn through_a_pipe_there_are_no_escape_codes() {
    let env = CliEnv::new(NOETA);
    let provider = session(&env);
    let args = run_args(&provider);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let both = format!("--- stdout\n{}--- stderr\n{}", stdout(&out), stderr(&out));
    assert!(!both.contains('\x1b'), "{both:?}");
    insta::assert_snapshot!("run_through_a_pipe", normalise(&env, &both));
}

#[test]
fn clicolor_force_colours_a_pipe_and_no_color_wins_over_it() {
    let env = CliEnv::new(NOETA);
    let provider = session(&env);
    let args = run_args(&provider);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let forced = env.run_with(&args, None, &[("CLICOLOR_FORCE", "1")]);
    assert!(
        stderr(&forced).contains("\x1b[32m+BETA"),
        "{:?}",
        stderr(&forced)
    );
    std::fs::write(env.workspace.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::remove_file(env.workspace.join("new.txt")).unwrap();
    let plain = env.run_with(&args, None, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert!(!stderr(&plain).contains('\x1b'), "{:?}", stderr(&plain));
}

/// The shell line of a run of the session (arguments quoted).
fn run_line(provider: &str) -> String {
    let args: Vec<String> = run_args(provider)
        .iter()
        .map(|a| format!("'{a}'"))
        .collect();
    format!("{NOETA} {}", args.join(" "))
}

/// Runs `line` in a pseudo-terminal (util-linux `script`); what the terminal received.
fn in_terminal(env: &CliEnv, line: &str, vars: &[(&str, &str)]) -> Output {
    let script = Path::new("/usr/bin/script");
    assert!(
        script.exists(),
        "this test needs util-linux `script` (Debian package bsdutils) for a pseudo-terminal"
    );
    let mut command = Command::new(script);
    command
        .args(["-qfec", line, "/dev/null"])
        .current_dir(&env.workspace)
        .env("HOME", &env.home)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in vars {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// Clears of the status line: indicatif's `\r` + erase-line.
const CLEAR: &str = "\r\x1b[2K";

/// The terminal's text with every drawing of the status line taken out: what stays on screen.
fn without_status(text: &str) -> String {
    let pieces: Vec<&str> = text.split(CLEAR).collect();
    let mut kept = String::new();
    for (i, piece) in pieces.iter().enumerate() {
        if i + 1 < pieces.len() {
            // Up to its last line end, what was printed; after it, a drawing, erased next.
            if let Some(end) = piece.rfind('\n') {
                kept.push_str(&piece[..=end]);
            }
        } else {
            kept.push_str(piece);
        }
    }
    kept
}

#[test]
fn in_a_terminal_colour_is_on_the_status_line_is_drawn_and_cleared_and_diffs_are_coloured() {
    let env = CliEnv::new(NOETA);
    let provider = session(&env);
    let line = run_line(&provider);
    let out = in_terminal(&env, &line, &[]);
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(out.status.success(), "{shown}");
    // The status line named the running command with its time, and was erased.
    let drawn: Vec<&str> = shown
        .split(CLEAR)
        .filter_map(|piece| piece.rsplit('\n').next())
        .filter(|draw| draw.contains("Bash(sleep 1.5; seq 1 12) · "))
        .collect();
    assert!(!drawn.is_empty(), "no status line in {shown:?}");
    assert!(drawn.iter().any(|d| d.contains(" · 1s")), "{drawn:?}");
    let screen = without_status(&shown);
    assert!(
        !screen.contains("Bash(sleep 1.5; seq 1 12) · "),
        "{screen:?}"
    );
    // Colour: the call's name bold, the diff's lines green and red.
    assert!(screen.contains("\x1b[1mBash\x1b[0m"), "{screen:?}");
    assert!(screen.contains("\x1b[31m-beta\x1b[0m"), "{screen:?}");
    assert!(screen.contains("\x1b[32m+BETA\x1b[0m"), "{screen:?}");
    insta::assert_snapshot!(
        "run_in_a_terminal",
        normalise(&env, &screen.replace('\x1b', "\\e"))
    );
}

#[test]
fn in_a_terminal_no_color_turns_colour_off() {
    let env = CliEnv::new(NOETA);
    let provider = session(&env);
    let line = run_line(&provider);
    let out = in_terminal(&env, &line, &[("NO_COLOR", "1")]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{shown}");
    let screen = without_status(&shown.replace("\r\n", "\n"));
    assert!(!screen.contains('\x1b'), "{screen:?}");
}

#[test]
fn verbose_shows_results_in_full_and_chat_shows_one_with_slash_show() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "seq 1 12" } }] },
        { "text": "Twelve." },
        { "text": "Shown." }
    ]));
    let mut args = run_args(&provider);
    args.push("--verbose".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("    12\n"), "{err}");
    assert!(!err.contains("+8 lines"), "{err}");

    let out = env.run_with(
        &[
            "chat",
            "--store",
            "memory:",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
        ],
        Some("count\n/show 1\n/show 7\n/exit\n"),
        &[],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("… +8 lines (/show 1 shows them)"), "{err}");
    let full: Vec<String> = (1..=12).map(|n| n.to_string()).collect();
    assert!(
        stdout(&out).contains(&format!("{}\n", full.join("\n"))),
        "{}",
        stdout(&out)
    );
    assert!(
        err.contains("no result 7: this chat has shown results 1 to 1"),
        "{err}"
    );
}

/// A shell command's lines are live progress as it prints them: the status line's detail on a
/// terminal, `{"progress": …}` lines with `--json`; the result follows as the call's record.
#[test]
fn a_shell_commands_lines_are_live_progress() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "echo first; echo; echo second" } }] },
        { "text": "Done." }
    ]));
    let mut args = run_args(&provider);
    args.push("--json".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let progress: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e.get("progress").cloned())
        .collect();
    assert_eq!(
        progress,
        [json!("first"), json!("second")],
        "{}",
        stdout(&out)
    );
}

#[test]
fn after_an_approval_the_status_line_shows_the_allowed_call_running() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "sleep 1.5; echo done" } }] },
        { "text": "ran it" }
    ]));
    let line = format!("{NOETA} run --store memory: --provider '{provider}' 'run it'");
    let script = Path::new("/usr/bin/script");
    assert!(
        script.exists(),
        "this test needs util-linux `script` (Debian package bsdutils) for a pseudo-terminal"
    );
    // The person answers the permission ask: `y`, typed into the terminal.
    let mut child = Command::new(script)
        .args(["-qfec", &line, "/dev/null"])
        .current_dir(&env.workspace)
        .env("HOME", &env.home)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"y\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("allow?"), "no permission ask in {shown:?}");
    let drawn: Vec<&str> = shown
        .split(CLEAR)
        .filter_map(|piece| piece.rsplit('\n').next())
        .filter(|draw| draw.contains("Bash(sleep 1.5; echo done) · "))
        .collect();
    assert!(
        drawn.iter().any(|d| d.contains(" · 1s")),
        "the status line stayed quiet after the approval: {shown:?}"
    );
}
