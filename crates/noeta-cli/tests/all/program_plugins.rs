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
        "`{program}` is needed by this test and is not installed (`cargo xtask test` installs it)"
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

/// `noeta run --plugin-dir DIR --provider PROVIDER GOAL`.
fn run_with_plugin(env: &CliEnv, dir: &Path, provider: &str, goal: &str) -> std::process::Output {
    env.run(&[
        "run",
        "--plugin-dir",
        dir.to_str().unwrap(),
        "--provider",
        provider,
        goal,
    ])
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
    let out = run_with_plugin(&env, &dir, &provider, "count");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    // The results and the records the tool made are in the log.
    let log = env.run(&["log", "--json", &task_of(&out)]);
    let log_text = stdout(&log);
    assert!(log.status.success(), "{}", stderr(&log));
    assert!(
        log_text.contains("words: 3 (3 in 1 texts so far)"),
        "{log_text}"
    );
    // The second call saw the state `reduce` folded from the first one's record.
    assert!(
        log_text.contains("words: 2 (5 in 2 texts so far)"),
        "{log_text}"
    );
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
    let out = run_with_plugin(&env, &dir, &provider, "shout");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let log = env.run(&["log", "--json", &task_of(&out)]);
    let log_text = stdout(&log);
    assert!(log_text.contains("HELLO (via node)"), "{log_text}");
    assert!(log_text.contains("\"uppered\""), "{log_text}");
}

/// Kill `noeta` while a step runs (a shell command in flight) with the Python example loaded,
/// then resume: a new worker starts a new program, whose tool sees the state `reduce` folds
/// from the records made before the kill.
#[test]
fn killed_mid_step_and_resumed_the_plugin_state_is_the_same() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        {"text": "Counting.", "calls": [{"name": "py_word_count", "input": {"text": "one two three"}}]},
        {"text": "Waiting.", "calls": [{"name": "Bash", "input": {"command": "touch started; sleep 30"}}]},
        {"text": "Again.", "calls": [{"name": "py_word_count", "input": {"text": "four five"}}]},
        {"text": "Done."}
    ]));
    let dir = example("python-plugin");
    let mut child = env
        .command(&[
            "run",
            "--plugin-dir",
            dir.to_str().unwrap(),
            "--provider",
            &provider,
            "--permission-mode",
            "bypassPermissions",
            "count",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = env.root().join("workspace/started");
    let start = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the shell command never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "noeta ended before the step"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let out = env.run(&[
        "resume",
        "--last",
        "--plugin-dir",
        dir.to_str().unwrap(),
        "--provider",
        &provider,
        "--permission-mode",
        "bypassPermissions",
    ]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}");
    let tasks = env.run(&["tasks", "--json"]);
    let listed: Value = serde_json::from_str(stdout(&tasks).lines().last().unwrap()).unwrap();
    let task = listed["id"].as_str().unwrap().to_owned();
    let log = env.run(&["log", "--json", &task]);
    let log_text = stdout(&log);
    assert!(
        log_text.contains("words: 3 (3 in 1 texts so far)"),
        "{log_text}"
    );
    assert!(
        log_text.contains("words: 2 (5 in 2 texts so far)"),
        "the state folded after the kill is the one before it: {log_text}"
    );
    let seqs: Vec<u64> = events(&log_text)
        .iter()
        .filter_map(|e| e.get("seq").and_then(Value::as_u64))
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
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
    // `tool`: a tool that breaks; `reduce`: a tool that records, folded by a `reduce` that
    // breaks; any other name: that hook breaks.
    let body = match hook {
        "tool" => format!(
            "@export.tool('broken_tool', 'Breaks.')\ndef broken(call, **args):\n    {act}\n"
        ),
        "reduce" => format!(
            "@export.tool('note', 'Notes.')\ndef note(call, **args):\n    call.record('noted', {{}})\n    return 'noted'\n\n@export.hook('reduce')\ndef broken(state, kind, data):\n    {act}\n"
        ),
        "run_command" => format!(
            "@export.hook('commands')\ndef commands(call, **args):\n    return {{'commands': [{{'name': 'breaks', 'description': 'Breaks.'}}]}}\n\n@export.hook('run_command')\ndef broken(call, **args):\n    {act}\n"
        ),
        _ => format!("@export.hook('{hook}')\ndef broken(call, **args):\n    {act}\n"),
    };
    std::fs::write(
        dir.join("plugin.py"),
        format!(
            "import os, sys, time\nfrom noeta_plugin import Plugin\nplugin = Plugin()\nexport = plugin.export('broken')\n\n{body}\nplugin.run()\n"
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
        let out = run_with_plugin(&env, &dir, &provider, "go");
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
    let out = run_with_plugin(&env, &dir, &provider, "hi");
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

#[test]
fn a_program_that_dies_at_start_fails_the_run_quoting_what_it_printed() {
    let env = CliEnv::new(NOETA);
    let dir = env.root().join("crashy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("noeta-plugin.toml"),
        "name = \"crashy\"\nversion = \"0.1.0\"\nadd-to = \"*\"\n\
         [extension]\ncommand = \"sh\"\n\
         args = [\"-c\", \"echo 'ModuleNotFoundError: no module named words' >&2; echo 'starting'; exit 3\"]\n\
         [[contributions]]\nsurface = \"session_pack\"\nname = \"crashy\"\nref = \"command:crashy\"\n",
    )
    .unwrap();
    let provider = env.script(json!([{ "text": "never" }]));
    let out = run_with_plugin(&env, &dir, &provider, "hello");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("plugin `crashy`")
            && err.contains("ModuleNotFoundError: no module named words"),
        "{err}"
    );
    // A program that prints nothing there still says how it ended.
    std::fs::write(
        dir.join("noeta-plugin.toml"),
        "name = \"crashy\"\nversion = \"0.1.0\"\nadd-to = \"*\"\n\
         [extension]\ncommand = \"sh\"\nargs = [\"-c\", \"exit 4\"]\n\
         [[contributions]]\nsurface = \"session_pack\"\nname = \"crashy\"\nref = \"command:crashy\"\n",
    )
    .unwrap();
    let out = run_with_plugin(&env, &dir, &provider, "hello");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("exit status: 4"), "{}", stderr(&out));
}

/// The task's events, read back with `noeta log --json`, checked gapless.
fn gapless_log(env: &CliEnv, out: &std::process::Output) -> String {
    let log = env.run(&["log", "--json", &task_of(out)]);
    assert!(log.status.success(), "{}", stderr(&log));
    let text = stdout(&log);
    let seqs: Vec<u64> = events(&text)
        .iter()
        .filter_map(|e| e.get("seq").and_then(Value::as_u64))
        .collect();
    assert!(
        !seqs.is_empty() && seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "the log is gapless: {seqs:?}"
    );
    text
}

/// A broken step hook (`context`) fails the turn with `internal_error`, naming the plugin.
#[test]
fn a_crashing_step_hook_fails_the_turn() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = broken_plugin(&env, "crash", "context");
    let provider = env.script(json!([{"text": "Hello."}]));
    let out = run_with_plugin(&env, &dir, &provider, "hi");
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("internal_error"), "{text}");
    assert!(text.contains("plugin `broken`"), "{text}");
    assert!(!text.contains("Hello."), "no model call was made: {text}");
    gapless_log(&env, &out);
}

/// A tool whose program crashes gives the model an error result; the turn goes on.
#[test]
fn a_crashing_tool_is_an_error_result_for_the_model() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = broken_plugin(&env, "crash", "tool");
    let provider = env.script(json!([
        {"text": "Trying.", "calls": [{"name": "broken_tool", "input": {}}]},
        {"text": "Done."}
    ]));
    let out = run_with_plugin(&env, &dir, &provider, "go");
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Done."), "{text}");
    let log = gapless_log(&env, &out);
    let result = events(&log)
        .into_iter()
        .find(|e| e["kind"] == "call_finished")
        .unwrap_or_else(|| panic!("no finished call in {log}"));
    assert_eq!(result["data"]["outcome"], "error", "{result}");
    assert!(
        result.to_string().contains("plugin `broken`"),
        "the error names the plugin: {result}"
    );
}

/// A `reduce` that crashes is a fold error: the task fails, naming the plugin, and the records
/// already made stay in the log.
#[test]
fn a_crashing_reduce_fails_the_fold() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = broken_plugin(&env, "crash", "reduce");
    let provider = env.script(json!([
        {"text": "Noting.", "calls": [{"name": "note", "input": {}}]},
        {"text": "Done."}
    ]));
    let out = run_with_plugin(&env, &dir, &provider, "go");
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("plugin `broken`"), "{text}");
    assert!(text.contains("reduce"), "{text}");
    let log = gapless_log(&env, &out);
    assert!(log.contains("\"noted\""), "the record stays: {log}");
}

/// `plugins check --resolve` starts each program, performs the handshake and lists what it
/// offers; a ref the handshake does not list, or a program that gives no handshake, is a
/// problem naming the plugin.
#[test]
fn check_resolve_performs_the_handshake_and_reports_the_exports() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = example("python-plugin");
    let out = env.run(&["plugins", "check", "--resolve", dir.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "export py-words: hooks [before_tool, commands, reduce, run_command], tools [py_word_count]"
        ),
        "{text}"
    );
    let json_out = env.run(&[
        "plugins",
        "check",
        "--resolve",
        "--json",
        dir.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&stdout(&json_out)).unwrap();
    let plugin = report["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "py-words")
        .unwrap();
    assert_eq!(
        plugin["program"]["exports"]["py-words"]["tools"],
        json!(["py_word_count"]),
        "{plugin}"
    );

    // A ref naming an export the program does not offer.
    let other = env.root().join("unlisted");
    std::fs::create_dir_all(&other).unwrap();
    for file in ["noeta_plugin.py", "plugin.py"] {
        std::fs::copy(dir.join(file), other.join(file)).unwrap();
    }
    std::fs::write(
        other.join("noeta-plugin.toml"),
        "name = \"unlisted\"\n[extension]\ncommand = \"python3\"\nargs = [\"plugin.py\"]\n\n[[contributions]]\nsurface = \"session_pack\"\nname = \"gone\"\nref = \"command:gone\"\n",
    )
    .unwrap();
    let out = env.run(&["plugins", "check", "--resolve", other.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("plugin `unlisted`: contribution 1 refs `command:gone`, which the program's handshake does not list (it lists: py-words)"),
        "{text}"
    );

    // A program that exits before its handshake.
    let dead = env.root().join("dead");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(
        dead.join("noeta-plugin.toml"),
        "name = \"dead\"\n[extension]\ncommand = \"python3\"\nargs = [\"-c\", \"raise SystemExit(4)\"]\n\n[[contributions]]\nsurface = \"session_pack\"\nname = \"dead\"\nref = \"command:dead\"\n",
    )
    .unwrap();
    let out = env.run(&["plugins", "check", "--resolve", dead.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("plugin `dead`: its program gave no handshake:"),
        "{text}"
    );
}

/// The chat's events (`--json`) from its standard output.
fn chat_events(out: &std::process::Output) -> Vec<Value> {
    events(&stdout(out))
}

/// `/reload-plugins` mid-chat after the plugin's program was edited: the old program is ended,
/// the next turn runs the new code (over the state folded so far) and records the new pin.
#[test]
fn reload_plugins_mid_chat_runs_the_edited_program_from_the_next_turn() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let plugin = env.home.join(".noeta/plugins/py-words");
    std::fs::create_dir_all(&plugin).unwrap();
    for file in ["noeta-plugin.toml", "noeta_plugin.py", "plugin.py"] {
        std::fs::copy(example("python-plugin").join(file), plugin.join(file)).unwrap();
    }
    let edit = format!(
        "sed -i 's/return f\"words: /return f\"WORDS: /' {}",
        plugin.join("plugin.py").display()
    );
    let provider = env.script(json!([
        { "calls": [{ "id": "c1", "name": "py_word_count", "input": { "text": "one two three" } }] },
        { "text": "counted" },
        { "calls": [{ "id": "e1", "name": "Bash", "input": { "command": edit } }] },
        { "text": "edited" },
        { "calls": [{ "id": "c2", "name": "py_word_count", "input": { "text": "four five" } }] },
        { "text": "counted again" }
    ]));
    let out = env.run_with(
        &[
            "chat",
            "--json",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
        ],
        Some("count\nedit the plugin\n/reload-plugins\ncount again\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("plugins reloaded"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("restart"),
        "nothing here needs a restart: {}",
        stderr(&out)
    );
    let events = chat_events(&out);
    let results: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "call_finished" && e["data"]["tool"] == "py_word_count")
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        results,
        [
            "words: 3 (3 in 1 texts so far)",
            "WORDS: 2 (5 in 2 texts so far)"
        ],
        "{events:?}"
    );
    let pins: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "plugins_pinned")
        .filter_map(|e| {
            e["data"]["pins"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == "py-words")
                .map(|p| p["version"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(pins.len(), 2, "{pins:?}");
    assert_ne!(pins[0], pins[1], "the edited program is a new pin");
}

/// A reload after the model settings changed keeps the chat's model and says a restart is
/// needed for them.
#[test]
fn reload_plugins_says_a_restart_is_needed_when_the_model_settings_changed() {
    let env = CliEnv::new(NOETA);
    let config = env.home.join(".noeta/config.toml");
    env.write(
        config.to_str().unwrap(),
        "[plugins.providers]\nmax_retries = 2\n",
    );
    let edit = format!(
        "printf '[plugins.providers]\\nmax_retries = 5\\n' > {}",
        config.display()
    );
    let provider = env.script(json!([
        { "calls": [{ "id": "e1", "name": "Bash", "input": { "command": edit } }] },
        { "text": "edited" },
        { "text": "still here" }
    ]));
    let out = env.run_with(
        &[
            "chat",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
        ],
        Some("edit the settings\n/reload-plugins\nagain\n/exit\n"),
        &[],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("plugins reloaded"), "{err}");
    assert!(
        err.contains(
            "the model settings (`[plugins.providers]`) changed: this chat keeps its model; restart noeta to use the new ones"
        ),
        "{err}"
    );
    assert!(stdout(&out).contains("still here"), "{}", stdout(&out));
}

/// A command whose program crashes is the command's error, shown to the user; the chat goes on.
#[test]
fn a_crashing_command_is_its_error_and_the_chat_goes_on() {
    require("python3");
    let env = CliEnv::new(NOETA);
    let dir = broken_plugin(&env, "crash", "run_command");
    let provider = env.script(json!([{ "text": "still here" }]));
    let out = env.run_with(
        &[
            "chat",
            "--plugin-dir",
            dir.to_str().unwrap(),
            "--provider",
            &provider,
        ],
        Some("/breaks\nhello\n/exit\n"),
        &[],
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("plugin `broken` (export `broken`): hook `run_command` failed"),
        "{text}"
    );
    assert!(text.contains("still here"), "{text}");
}
