//! Plugins that bring a program (`[extension]` in `noeta-plugin.toml`), run end to end through
//! the binary: the Python example's tool, guard and folded state; a program that crashes,
//! hangs or prints garbage in a hook; and a manifest error naming the plugin and the entry.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::{Path, PathBuf};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn require(program: &str) {
    let found = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        found,
        "`{program}` is needed by this test and is not installed (.ci/run installs it)"
    );
}

/// The task a run started (its `task <id>` line).
fn task_of(out: &std::process::Output) -> String {
    let text = format!("{}{}", stdout(out), stderr(out));
    text.lines()
        .find_map(|line| {
            line.strip_prefix("task ")
                .map(|rest| rest.split([' ', ':']).next().unwrap_or("").to_owned())
        })
        .unwrap_or_else(|| panic!("no task line in {text}"))
}

/// The JSON lines of a `--json` run.
fn events(out: &str) -> Vec<Value> {
    out.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn the_python_example_counts_words_guards_bash_and_folds_its_state() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        {"text": "Counting.", "calls": [{"name": "py_word_count", "input": {"text": "one two three"}}]},
        {"text": "Again.", "calls": [{"name": "py_word_count", "input": {"text": "four five"}}]},
        {"text": "Cleaning.", "calls": [{"name": "Bash", "input": {"command": "rm -rf build"}}]},
        {"text": "Done."}
    ]));
    let dir = example("python-plugin");
    let out = env.run(&[
        "run",
        "--plugin-dir",
        dir.to_str().unwrap(),
        "--provider",
        &provider,
        "count",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    // The results and the records the tool made are in the log.
    let log = env.run(&["log", "--json", &task_of(&out)]);
    let log_text = stdout(&log);
    assert!(log.status.success(), "{}", stderr(&log));
    assert!(log_text.contains("words: 3"), "{log_text}");
    assert!(log_text.contains("words: 2"), "{log_text}");
    assert!(
        log_text.contains("py-words refuses `rm -rf`"),
        "the guard denies the Bash call: {log_text}"
    );
    let counted = events(&log_text)
        .into_iter()
        .filter(|e| e.to_string().contains("\"counted\""))
        .count();
    assert_eq!(counted, 2, "{log_text}");
}

#[test]
fn the_node_example_upper_cases_and_marks_its_results() {
    require("node");
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        {"text": "Shouting.", "calls": [{"name": "node_upper", "input": {"text": "hello"}}]},
        {"text": "Done."}
    ]));
    let dir = example("node-plugin");
    let out = env.run(&[
        "run",
        "--plugin-dir",
        dir.to_str().unwrap(),
        "--provider",
        &provider,
        "shout",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let log = env.run(&["log", "--json", &task_of(&out)]);
    let log_text = stdout(&log);
    assert!(log_text.contains("HELLO (via node)"), "{log_text}");
    assert!(log_text.contains("\"uppered\""), "{log_text}");
}

fn broken_plugin(env: &CliEnv, behaviour: &str, hook: &str) -> PathBuf {
    let dir = env.root().join(format!("broken-{behaviour}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        example("python-plugin/noeta_plugin.py"),
        dir.join("noeta_plugin.py"),
    )
    .unwrap();
    std::fs::write(
        dir.join("noeta-plugin.toml"),
        "name = \"broken\"\nadd-to = \"*\"\n[extension]\ncommand = \"python3\"\nargs = [\"plugin.py\"]\nhook-timeout-ms = 1500\n\n[[contributions]]\nsurface = \"session_pack\"\nname = \"broken\"\nref = \"command:broken\"\n",
    )
    .unwrap();
    let act = match behaviour {
        "crash" => "os._exit(3)",
        "hang" => "time.sleep(60)",
        _ => "sys.stdout.write('this is not json\\n'); sys.stdout.flush(); time.sleep(60)",
    };
    std::fs::write(
        dir.join("plugin.py"),
        format!(
            "import os, sys, time\nfrom noeta_plugin import Plugin\nplugin = Plugin()\nexport = plugin.export('broken')\n\n@export.hook('{hook}')\ndef broken(call, **args):\n    {act}\n\nplugin.run()\n"
        ),
    )
    .unwrap();
    dir
}

/// A broken `before_tool` denies the call; the turn goes on and the log stays whole.
#[test]
fn a_crashing_hanging_or_garbled_before_tool_denies_the_call() {
    require("python3");
    for behaviour in ["crash", "hang", "garbage"] {
        let env = CliEnv::new(NOETA);
        let dir = broken_plugin(&env, behaviour, "before_tool");
        let provider = env.script(json!([
            {"text": "Reading.", "calls": [{"name": "Glob", "input": {"pattern": "*"}}]},
            {"text": "Done."}
        ]));
        let out = env.run(&[
            "run",
            "--plugin-dir",
            dir.to_str().unwrap(),
            "--provider",
            &provider,
            "go",
        ]);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "{behaviour}: {text}");
        assert!(
            text.contains("plugin `broken` (export `broken`): hook `before_tool` failed"),
            "{behaviour}: {text}"
        );
        assert!(
            text.contains("Done."),
            "{behaviour}: the turn went on: {text}"
        );
        let log = env.run(&["log", "--json", &task_of(&out)]);
        assert!(log.status.success(), "{}", stderr(&log));
        let seqs: Vec<u64> = events(&stdout(&log))
            .iter()
            .filter_map(|e| e.get("seq").and_then(Value::as_u64))
            .collect();
        assert!(
            seqs.len() > 3 && seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "{behaviour}: the log is gapless: {seqs:?}"
        );
    }
}

/// A broken observer (`on_event`) is skipped: the run finishes as if it were not there.
#[test]
fn a_crashing_observer_is_skipped() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = broken_plugin(&env, "crash", "on_event");
    let provider = env.script(json!([{"text": "Hello."}]));
    let out = env.run(&[
        "run",
        "--plugin-dir",
        dir.to_str().unwrap(),
        "--provider",
        &provider,
        "hi",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("Hello."));
}

#[test]
fn a_command_ref_without_an_extension_table_names_the_plugin_and_entry() {
    let env = CliEnv::new(NOETA);
    let dir = env.root().join("noprog");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("noeta-plugin.toml"),
        "name = \"noprog\"\n[[contributions]]\nsurface = \"session_pack\"\nname = \"x\"\nref = \"command:x\"\n",
    )
    .unwrap();
    let out = env.run(&["plugins", "check", dir.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("plugin `noprog`") && text.contains("no `[extension]` table"),
        "{text}"
    );
}
