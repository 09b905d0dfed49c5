//! End-to-end tests of `noeta run`, `resume`, `tasks`, `log` and `answer` through the real
//! binary, with a scripted model, a SQLite store in a temporary workspace, and answers given
//! on standard input.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use noeta_testkit::cli::CliEnv;

use serde_json::{Value, json};

/// A fresh home and workspace for the real binary.
fn new_env() -> CliEnv {
    CliEnv::new(env!("CARGO_BIN_EXE_noeta"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn call(name: &str, input: Value) -> Value {
    json!({ "calls": [{ "name": name, "input": input }] })
}

/// The task id `noeta run` announced.
fn task_of(out: &Output) -> String {
    let err = text(&out.stderr);
    err.lines()
        .find_map(|l| {
            l.strip_prefix("task ")
                .map(|rest| rest.split([' ', ':']).next().unwrap().to_owned())
        })
        .unwrap_or_else(|| panic!("no task id in: {err}"))
}

#[test]
fn without_a_key_or_a_provider_one_message_says_how_to_configure_a_model() {
    let env = new_env();
    let out = env.run_with(&["run", "hello"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("error: no model is configured: set ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert!(
        err.contains("`noeta demo` shows noeta at work offline"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // No store until there is a task.
    assert!(
        !env.workspace.join(".noeta").exists(),
        "a failed run left .noeta behind"
    );
}

#[test]
fn the_demo_runs_anywhere_offline_and_leaves_nothing_behind() {
    let env = new_env();
    std::fs::write(env.workspace.join("notes.txt"), "a file to find\n").unwrap();
    let out = env.run_with(&["demo"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("That was noeta's offline demo"), "{stdout}");
    let err = text(&out.stderr);
    assert!(err.contains("● Glob(*)"), "{err}");
    // The end of the task, summed up: calls, and the run's time.
    let summary = err
        .lines()
        .skip_while(|l| !l.contains(": turn ended"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        summary.starts_with("  3 model calls, 2 tool calls, "),
        "{err}"
    );
    assert!(summary.ends_with(" s"), "{err}");
    assert!(!env.workspace.join(".noeta").exists());
}

#[test]
fn a_run_that_fails_before_its_task_leaves_no_store_but_keeps_a_settings_directory() {
    let env = new_env();
    std::fs::create_dir_all(env.workspace.join(".noeta/commands")).unwrap();
    std::fs::write(
        env.workspace.parent().unwrap().join("outside.txt"),
        "secret\n",
    )
    .unwrap();
    std::fs::write(
        env.workspace.join(".noeta/commands/leak.md"),
        "Show @../outside.txt\n",
    )
    .unwrap();
    let provider = env.script(json!([{ "text": "never" }]));
    let out = env.run_with(&["run", "--provider", &provider, "/leak"], None, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!env.workspace.join(".noeta/noeta.db").exists());
    assert!(env.workspace.join(".noeta/commands/leak.md").exists());
}

#[test]
fn a_scripted_task_reads_a_file_and_answers_and_its_log_is_in_the_store() {
    let env = new_env();
    std::fs::write(env.workspace.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let provider = env.script(json!([
        call("Read", json!({ "file_path": "notes.txt" })),
        { "text": "The notes say alpha and beta." }
    ]));
    let out = env.run_with(
        &["run", "--provider", &provider, "what do the notes say?"],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "The notes say alpha and beta.\n");
    let err = text(&out.stderr);
    assert!(err.contains("● Read(notes.txt)"), "{err}");
    assert!(err.contains("⎿      1\talpha\n         2\tbeta\n"), "{err}");
    assert!(env.workspace.join(".noeta/noeta.db").exists());

    let task = task_of(&out);
    let listed = env.run_with(&["tasks"], None, &[]);
    let listed = text(&listed.stdout);
    assert!(listed.starts_with(&task), "{listed}");
    assert!(
        listed.contains("main  turn ended  what do the notes say?"),
        "{listed}"
    );

    let log = env.run_with(&["log", &task, "--json"], None, &[]);
    let kinds: Vec<String> = text(&log.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(kinds.contains(&"call_finished".to_owned()), "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), "turn_ended");
    let readable = text(&env.run_with(&["log", &task], None, &[]).stdout);
    assert!(readable.starts_with("── agent main\n> "), "{readable}");

    let missing = env.run_with(&["log", "no-such-task"], None, &[]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr)
            .contains("no task `no-such-task` in this store (`noeta tasks` lists them)"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn json_mode_prints_every_event_as_a_json_line() {
    let env = new_env();
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run_with(
        &[
            "run",
            "--provider",
            &provider,
            "--store",
            "memory:",
            "--json",
            "say hi",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "assistant_reply" && l["data"]["text"] == "hi")
    );
    assert!(lines.iter().any(|l| l["kind"] == "turn_ended"));
}

#[test]
fn a_write_asks_permission_answered_on_stdin() {
    for (answer, written) in [("y\n", true), ("n\n", false), ("always\n", true)] {
        let env = new_env();
        let provider = env.script(json!([
            call("Write", json!({ "file_path": "out.txt", "content": "made\n" })),
            { "text": "done" }
        ]));
        let out = env.run_with(
            &["run", "--provider", &provider, "write it"],
            Some(answer),
            &[],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        // The ask shows what would be written, as a diff, before the answer.
        assert!(
            err.contains("? Write wants to write out.txt (1 line):") && err.contains("+made"),
            "{err}"
        );
        assert_eq!(
            env.workspace.join("out.txt").exists(),
            written,
            "{answer}: {err}"
        );
    }
}

#[test]
fn with_nothing_on_stdin_an_ask_is_denied_at_once() {
    let env = new_env();
    let provider = env.script(json!([
        call("Write", json!({ "file_path": "out.txt", "content": "made\n" })),
        { "text": "done" }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "write it"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no answer (standard input is closed): denied"));
    assert!(!env.workspace.join("out.txt").exists());
}

#[test]
fn accept_edits_writes_without_asking_and_plan_refuses_the_write() {
    for (mode, written) in [("accept-edits", true), ("plan", false)] {
        let env = new_env();
        let provider = env.script(json!([
            call("Write", json!({ "file_path": "out.txt", "content": "made\n" })),
            { "text": "done" }
        ]));
        let out = env.run_with(
            &[
                "run",
                "--provider",
                &provider,
                "--permission-mode",
                mode,
                "write it",
            ],
            None,
            &[],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("wants to run"), "{mode}");
        assert_eq!(env.workspace.join("out.txt").exists(), written, "{mode}");
    }
    let env = new_env();
    let out = env.run_with(&["run", "--permission-mode", "yolo", "x"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--permission-mode `yolo` is not one of"));
}

#[test]
fn ask_user_question_is_answered_on_stdin_and_the_turn_goes_on() {
    let env = new_env();
    let provider = env.script(json!([
        call("AskUserQuestion", json!({ "questions": [{
            "question": "Which colour?", "header": "Colour", "multiSelect": false,
            "options": [
                { "label": "Red", "description": "warm" },
                { "label": "Blue", "description": "cool" }
            ]
        }]})),
        { "text": "Blue it is." }
    ]));
    let out = env.run_with(
        &["run", "--provider", &provider, "pick a colour"],
        Some("2\n"),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Blue it is.\n");
    let task = task_of(&out);
    let log = text(&env.run_with(&["log", &task, "--json"], None, &[]).stdout);
    assert!(
        log.contains(r#""answers":{"Which colour?":"Blue"}"#),
        "{log}"
    );
}

#[test]
fn an_unanswered_question_parks_and_answer_then_resume_finish_it() {
    let env = new_env();
    let provider = env.script(json!([
        call("AskUserQuestion", json!({ "questions": [{
            "question": "Go on?", "header": "Go", "multiSelect": false,
            "options": [
                { "label": "Yes", "description": "go on" },
                { "label": "No", "description": "stop" }
            ]
        }]})),
        { "text": "Going on." }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "ask me"], None, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let task = task_of(&out);
    assert!(text(&out.stderr).contains(&format!("noeta answer {task}")));
    // Plain text answers a single question.
    let answered = env.run_with(
        &["answer", &task, "--provider", &provider, "Yes"],
        None,
        &[],
    );
    assert!(answered.status.success(), "{}", text(&answered.stderr));
    let resumed = env.run_with(&["resume", "--last", "--provider", &provider], None, &[]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "Going on.\n");
    let unknown = env.run_with(&["resume", "nope", "--provider", &provider], None, &[]);
    assert!(text(&unknown.stderr).contains("no task `nope` in this store"));
}

#[test]
fn project_settings_choose_the_permission_mode_and_flags_override_them() {
    let env = new_env();
    std::fs::create_dir_all(env.workspace.join(".noeta")).unwrap();
    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        "[plugins.governance]\npermission_mode = \"acceptEdits\"\n",
    )
    .unwrap();
    env.trust();
    let provider = env.script(json!([
        call("Write", json!({ "file_path": "out.txt", "content": "made\n" })),
        { "text": "done" }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "write it"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        env.workspace.join("out.txt").exists(),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(env.workspace.join("out.txt")).unwrap();
    let planned = env.run_with(
        &[
            "run",
            "--provider",
            &provider,
            "--permission-mode",
            "plan",
            "write it",
        ],
        None,
        &[],
    );
    assert!(planned.status.success(), "{}", text(&planned.stderr));
    assert!(
        !env.workspace.join("out.txt").exists(),
        "the flag wins over the file"
    );

    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        "[plugins.fs]\nwrite_mode = 3\n",
    )
    .unwrap();
    env.trust();
    let bad = env.run_with(&["run", "--provider", &provider, "write it"], None, &[]);
    assert_eq!(bad.status.code(), Some(1));
    let err = text(&bad.stderr);
    assert!(err.contains("write_mode"), "{err}");
}

#[test]
fn a_secret_reaches_the_plugin_but_never_the_store_or_the_output() {
    let env = new_env();
    std::fs::create_dir_all(env.workspace.join(".noeta")).unwrap();
    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        "[plugins.fs.shell_env]\nAPI_TOKEN = \"{env:NOETA_TEST_SECRET}\"\n",
    )
    .unwrap();
    env.trust();
    let provider = env.script(json!([
        // The script checks the secret by its length: the model never sees its value.
        call("Bash", json!({ "command": "test ${#API_TOKEN} -eq 15 && echo token-present" })),
        { "text": "done" }
    ]));
    let out = env.run_with(
        &[
            "run",
            "--provider",
            &provider,
            "--permission-mode",
            "bypassPermissions",
            "check",
        ],
        None,
        &[("NOETA_TEST_SECRET", "s3cr3t-value-42")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("token-present"),
        "{}",
        text(&out.stderr)
    );
    let task = task_of(&out);
    let log = env.run_with(&["log", &task, "--json"], None, &[]);
    let mut everything = text(&out.stdout) + &text(&out.stderr) + &text(&log.stdout);
    for entry in std::fs::read_dir(env.workspace.join(".noeta")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            everything.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    assert!(!everything.contains("s3cr3t-value-42"), "the secret leaked");
    assert!(everything.contains("token-present"));

    let unset = env.run_with(
        &[
            "run",
            "--provider",
            &provider,
            "--permission-mode",
            "bypassPermissions",
            "check",
        ],
        None,
        &[],
    );
    assert_eq!(unset.status.code(), Some(1));
    assert!(
        text(&unset.stderr).contains("NOETA_TEST_SECRET"),
        "{}",
        text(&unset.stderr)
    );
}

#[test]
fn a_task_stopped_before_its_goal_was_recorded_is_listed_as_such_and_not_resumed() {
    let env = new_env();
    {
        let stores = noeta::backends::open_store(
            None,
            &env.workspace,
            std::sync::Arc::new(noeta_core::store::SystemClock),
        )
        .unwrap();
        let task = noeta_core::store::TaskId::new("empty-1").unwrap();
        let made = stores.log.create_task(&task, None);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(made)
            .unwrap();
    }
    let listed = text(&env.run_with(&["tasks"], None, &[]).stdout);
    assert!(
        listed.contains("empty-1    never started (stopped before its goal was recorded)"),
        "{listed}"
    );
    let provider = env.script(json!([{ "text": "x" }]));
    let out = env.run_with(&["resume", "--last", "--provider", &provider], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("task empty-1 was never started (stopped before its goal was recorded): there is nothing to resume; start it again with `noeta run`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_model_can_come_from_the_settings_and_a_bad_key_is_named() {
    let env = new_env();
    let provider = env.script(json!([{ "text": "configured" }]));
    std::fs::create_dir_all(env.workspace.join(".noeta")).unwrap();
    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        format!("[plugins.providers]\nprovider = \"{provider}\"\n"),
    )
    .unwrap();
    env.trust();
    let out = env.run_with(&["run", "hello"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "configured\n");

    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        "[plugins.providers]\nmodle = \"x\"\n",
    )
    .unwrap();
    env.trust();
    let out = env.run_with(&["run", "hello"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("settings [plugins.providers]: unknown key `modle`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn chat_keeps_one_task_across_messages_and_answers_slash_commands() {
    let env = new_env();
    let provider = env.script(json!([{ "text": "first answer" }, { "text": "second answer" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("hello\n/help\n/nope\nand again\n/tasks\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("first answer\nsecond answer\n"),
        "{stdout}"
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("/reload-plugins"),
        "the help lists the commands: {err}"
    );
    assert!(err.contains("/nope: no such command"), "{err}");
    let tasks: Vec<&str> = stdout.lines().filter(|l| l.contains("event(s)")).collect();
    assert_eq!(tasks.len(), 1, "one task for the whole chat: {stdout}");
}

#[test]
fn chat_carries_on_after_ctrl_c_and_finishes_the_interrupted_turn_first() {
    let env = new_env();
    let provider = env.script(json!([
        call("Bash", json!({ "command": "sleep 2" })),
        { "text": "after the pause" },
        { "text": "the second answer" }
    ]));
    let mut child = Command::new(env!("CARGO_BIN_EXE_noeta"))
        .args([
            "chat",
            "--provider",
            &provider,
            "--permission-mode",
            "bypassPermissions",
        ])
        .env("HOME", &env.home)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .current_dir(&env.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"wait a bit\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    stdin.write_all(b"and now?\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("interrupted: the step was cancelled"), "{err}");
    assert!(
        err.contains("(finishing the interrupted turn first)"),
        "{err}"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("after the pause"), "{stdout}");
    assert!(stdout.contains("the second answer"), "{stdout}");
}

/// Built with the `keyring` feature, `noeta` looks `{keyring:…}` up in the kernel keyring of
/// the session it runs in and names the entry it did not find. (Reading a stored entry is
/// tested with a mock store in the `noeta` crate: sandboxed hosts may refuse to add keys.)
#[cfg(all(feature = "keyring", target_os = "linux"))]
#[test]
fn with_the_keyring_feature_a_missing_os_keyring_entry_is_named() {
    let env = new_env();
    let user = format!("run-test-{}", std::process::id());
    std::fs::create_dir_all(env.workspace.join(".noeta")).unwrap();
    std::fs::write(
        env.workspace.join(".noeta/config.toml"),
        format!("[plugins.fs.shell_env]\nAPI_TOKEN = \"{{keyring:noeta-test/{user}}}\"\n"),
    )
    .unwrap();
    env.trust();
    let provider = env.script(json!([{ "text": "done" }]));
    let out = env.run_with(&["run", "--provider", &provider, "check"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!(
            "the keyring has no entry for service `noeta-test`, user `{user}`, needed by `{{keyring:noeta-test/{user}}}` for plugin `fs`"
        )),
        "{}",
        text(&out.stderr)
    );
}

/// Writes `notes.txt` and a script in which main hands the question to explore, which reads
/// the file and answers `explore_says`; main then answers `main_says`.
fn explore_reads_the_notes(env: &CliEnv, main_says: &str, explore_says: &str) -> String {
    std::fs::write(env.workspace.join("notes.txt"), "the answer is 42\n").unwrap();
    env.script_file(json!({
        "turns": [
            call("Task", json!({
                "description": "find the answer",
                "prompt": "What does notes.txt say?",
                "subagent_type": "explore"
            })),
            { "text": main_says }
        ],
        "agents": { "explore": { "turns": [
            call("Read", json!({ "file_path": "notes.txt" })),
            { "text": explore_says }
        ] } }
    }))
}

#[test]
fn main_delegates_to_explore_and_explore_runs_on_its_own() {
    let env = new_env();
    let provider = explore_reads_the_notes(
        &env,
        "Explore found it: 42.",
        "notes.txt says the answer is 42.",
    );
    let out = env.run_with(
        &["run", "--provider", &provider, "find the answer"],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().last(),
        Some("Explore found it: 42.")
    );
    let err = text(&out.stderr);
    assert!(err.contains("● Task("), "{err}");
    assert!(
        err.contains("● Read(notes.txt)"),
        "the child's activity shows: {err}"
    );
    let task = task_of(&out);
    let log = text(&env.run_with(&["log", &task, "--json"], None, &[]).stdout);
    assert!(
        log.contains("Subagent `explore`") && log.contains("reports:"),
        "{log}"
    );
    let listed = text(&env.run_with(&["tasks"], None, &[]).stdout);
    assert!(
        listed.contains("explore"),
        "the child task is listed: {listed}"
    );

    // The preset runs as the main agent too.
    let alone = env.script(json!([
        call("Read", json!({ "file_path": "notes.txt" })),
        { "text": "It says 42." }
    ]));
    let out = env.run_with(
        &[
            "run",
            "--agent",
            "explore",
            "--provider",
            &alone,
            "read the notes",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It says 42.\n");
    let unknown = env.run_with(
        &["run", "--agent", "nobody", "--provider", &alone, "x"],
        None,
        &[],
    );
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        text(&unknown.stderr).contains("nobody") && text(&unknown.stderr).contains("explore"),
        "{}",
        text(&unknown.stderr)
    );
}

#[test]
fn main_activates_a_skill_delegates_to_explore_and_remembers_for_the_next_task() {
    let env = new_env();
    // Memory is off for the official agents: the user's settings turn it on.
    let settings = env.home.join(".noeta");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("config.toml"),
        "[agents.main]\nadd_plugins = [\"memory\"]\n",
    )
    .unwrap();
    let skill = env.workspace.join(".noeta/skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Write the release notes from CHANGES.md.\n---\nAsk explore what CHANGES.md lists, then write the notes.\n",
    )
    .unwrap();
    std::fs::write(
        env.workspace.join("CHANGES.md"),
        "- fix the parser\n- faster startup\n",
    )
    .unwrap();

    let provider = env.script_file(json!({
        "turns": [
            call("skill", json!({ "skill": "release-notes" })),
            call("Task", json!({
                "description": "read the changes",
                "prompt": "What does CHANGES.md list?",
                "subagent_type": "explore"
            })),
            call("memory_write", json!({
                "name": "release-notes-process",
                "text": "Release notes are written from CHANGES.md; explore reads it first.",
                "description": "How this project's release notes are written",
                "type": "procedural",
                "keywords": "release, notes, changelog"
            })),
            { "text": "Release notes: the parser is fixed and startup is faster." }
        ],
        "agents": { "explore": { "turns": [
            call("Read", json!({ "file_path": "CHANGES.md" })),
            { "text": "CHANGES.md lists a parser fix and faster startup." }
        ] } }
    }));
    // The memory write is a medium-risk call: the user allows it on stdin.
    let out = env.run_with(
        &["run", "--provider", &provider, "write the release notes"],
        Some("y\n"),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().last(),
        Some("Release notes: the parser is fixed and startup is faster.")
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("● Read(CHANGES.md)"),
        "explore read the file: {err}"
    );
    assert!(err.contains("? memory_write wants to run"), "{err}");
    let first = task_of(&out);
    let log = text(&env.run_with(&["log", &first, "--json"], None, &[]).stdout);
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let activated = records
        .iter()
        .find(|r| r["extension"] == "skills" && r["kind"] == "activated")
        .unwrap_or_else(|| panic!("no activation recorded: {log}"));
    assert_eq!(activated["data"]["name"], "release-notes", "{activated}");
    assert_eq!(
        activated["data"]["sha256"].as_str().map(str::len),
        Some(64),
        "activation is recorded with the SKILL.md hash: {activated}"
    );
    assert!(
        log.contains("Subagent `explore`") && log.contains("a parser fix and faster startup"),
        "{log}"
    );
    let memory =
        std::fs::read_to_string(env.home.join(".noeta/memories/release-notes-process.md")).unwrap();
    assert!(memory.contains("type: procedural"), "{memory}");
    assert!(
        memory.ends_with("Release notes are written from CHANGES.md; explore reads it first.\n"),
        "{memory}"
    );

    // A later task: the index lists the memory and the recall names it at intake.
    let provider = env.script(json!([{ "text": "We write them from CHANGES.md." }]));
    let out = env.run_with(
        &[
            "run",
            "--provider",
            &provider,
            "how are the release notes written?",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let second = task_of(&out);
    assert_ne!(first, second);
    let log = text(&env.run_with(&["log", &second, "--json"], None, &[]).stdout);
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let index = records
        .iter()
        .find(|r| r["extension"] == "memory" && r["kind"] == "index")
        .unwrap_or_else(|| panic!("no index recorded: {log}"));
    assert!(
        index["data"]["index"]
            .as_str()
            .unwrap()
            .contains("release-notes-process"),
        "{index}"
    );
    assert!(
        records.iter().any(|r| r
            .to_string()
            .contains("Saved memories that may bear on this message")
            && r.to_string().contains("release-notes-process")),
        "the recall reminder is recorded at intake: {log}"
    );
}

#[test]
fn a_result_shows_under_its_call_before_the_next_reply() {
    // A Read's record is written with the next reply; the terminal shows it as it finishes.
    let env = new_env();
    std::fs::write(env.workspace.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(env.workspace.join("b.txt"), "beta\n").unwrap();
    let provider = env.script(json!([
        { "text": "first", "calls": [{ "name": "Read", "input": { "file_path": "a.txt" } }] },
        { "text": "second", "calls": [{ "name": "Read", "input": { "file_path": "b.txt" } }] },
        { "text": "done" }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "read"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let at = |needle: &str| {
        err.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing from {err}"))
    };
    assert!(at("● Read(a.txt)") < at("alpha"));
    assert!(at("alpha") < at("● Read(b.txt)"));
    assert!(at("● Read(b.txt)") < at("beta"));
    assert_eq!(err.matches("alpha").count(), 1, "shown once: {err}");
}

#[test]
fn with_web_switched_off_main_and_its_subagents_run_without_it() {
    let env = new_env();
    let settings = env.home.join(".noeta");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("config.toml"),
        "[plugins.web]\nenabled = false\n",
    )
    .unwrap();
    let provider = explore_reads_the_notes(&env, "It is 42.", "42.");
    let out = env.run_with(
        &["run", "--provider", &provider, "find the answer"],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().last(), Some("It is 42."));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "warning: plugin `web` is switched off by the settings; agent `main` runs without it"
        ) && err.contains("agent `explore` runs without it"),
        "{err}"
    );
}

/// Anthropic events of a reply whose text is `text`, as one SSE body; `whole` closes the
/// message, else the stream stops after the text.
fn anthropic_events(text: &str, whole: bool) -> String {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
            "content": [], "model": "claude-test", "stop_reason": null,
            "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    ];
    if whole {
        events.extend([
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]);
    }
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// How a scripted server answers one request.
enum Answer {
    /// A streamed body; `cut` drops the connection before the chunked body ends.
    Stream { body: String, cut: bool },
    /// A status with a JSON body and extra headers.
    Status(u16, String, &'static str),
}

/// A model server on the loopback interface answering each request with the next answer
/// (the last one again once they run out); its base URL.
fn model_server(answers: Vec<Answer>) -> String {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut answers = answers.into_iter().peekable();
        let mut last = None;
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let mut reader = BufReader::new(socket.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut request = vec![0; length];
            let _ = reader.read_exact(&mut request);
            if let Some(next) = answers.next() {
                last = Some(next);
            }
            match last.as_ref().unwrap() {
                Answer::Stream { body, cut } => {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                    let _ = socket.write_all(head.as_bytes());
                    let _ = socket.write_all(format!("{:x}\r\n{body}\r\n", body.len()).as_bytes());
                    if !cut {
                        let _ = socket.write_all(b"0\r\n\r\n");
                    }
                }
                Answer::Status(code, body, headers) => {
                    let head = format!(
                        "HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes());
                    let _ = socket.write_all(body.as_bytes());
                }
            }
            let _ = socket.flush();
        }
    });
    base
}

/// A model server that streams `text` for each request and then drops the connection before
/// the reply is whole.
fn cut_off_model(text: &str) -> String {
    model_server(vec![Answer::Stream {
        body: anthropic_events(text, false),
        cut: true,
    }])
}

/// `[plugins.providers]` pointing `anthropic` at `base` with `extra` settings lines.
fn anthropic_at(env: &CliEnv, base: &str, extra: &str) {
    env.write_trusted(
        ".noeta/config.toml",
        &format!(
            "[plugins.providers]\nprovider = \"anthropic\"\nbase_url = \"{base}\"\napi_key = \"test-key\"\n{extra}"
        ),
    );
}

#[test]
fn each_retry_shows_one_line_and_the_reply_still_lands() {
    let env = new_env();
    let overloaded = || {
        Answer::Status(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                .to_string(),
            "retry-after-ms: 30\r\n",
        )
    };
    let base = model_server(vec![
        overloaded(),
        overloaded(),
        Answer::Stream {
            body: anthropic_events("Through at last.", true),
            cut: false,
        },
    ]);
    anthropic_at(&env, &base, "max_retries = 3\n");
    let out = env.run_with(&["run", "write it"], None, &[]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout), "Through at last.\n");
    let retries: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("retrying in "))
        .collect();
    assert_eq!(retries.len(), 2, "{err}");
    assert!(retries[0].contains("anthropic: HTTP 529"), "{err}");
    assert!(retries[0].ends_with("(attempt 2 of 4)"), "{err}");
    assert!(retries[1].ends_with("(attempt 3 of 4)"), "{err}");
}

#[test]
fn an_outage_ends_with_the_model_side_error_naming_the_endpoint() {
    let env = new_env();
    let base = model_server(vec![Answer::Status(
        500,
        json!({"type": "error", "error": {"type": "api_error", "message": "Internal trouble"}})
            .to_string(),
        "retry-after-ms: 10\r\n",
    )]);
    anthropic_at(&env, &base, "max_retries = 2\n");
    let out = env.run_with(&["run", "write it"], None, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the turn failed: provider: transient provider error: anthropic: HTTP 500"),
        "{err}"
    );
    assert!(
        err.contains(&format!("— {base}/v1/messages: gave up after 3 attempts")),
        "{err}"
    );
    assert!(
        !err.contains("lease"),
        "the model-side failure is reported as such: {err}"
    );
}

#[test]
fn a_streamed_reply_that_is_cut_off_is_shown_as_not_recorded() {
    let env = new_env();
    let base = cut_off_model("Half a thou");
    anthropic_at(&env, &base, "max_retries = 0\n");
    let out = env.run_with(&["run", "write an essay"], None, &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stdout.contains("Half a thou"),
        "the text was shown: {stdout}"
    );
    assert!(
        stderr.contains("the reply above stopped before it was whole and was not recorded"),
        "{stderr}"
    );
    let log = env.run_with(&["log", &task_of(&out), "--json"], None, &[]);
    let log = text(&log.stdout);
    assert!(!log.contains("assistant_reply"), "{log}");
    assert!(log.contains("turn_failed"), "{log}");
}

#[test]
fn a_malformed_answer_is_refused_and_the_question_stays_open() {
    let env = new_env();
    let provider = env.script(json!([
        call("AskUserQuestion", json!({ "questions": [{
            "question": "Go on?", "header": "Go", "multiSelect": false,
            "options": [
                { "label": "Yes", "description": "go on" },
                { "label": "No", "description": "stop" }
            ]
        }]})),
        { "text": "Going on." }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "ask me"], None, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let task = task_of(&out);
    let answer = |args: &[&str]| {
        let mut all = vec!["answer", task.as_str(), "--provider", provider.as_str()];
        all.extend_from_slice(args);
        env.run_with(&all, None, &[])
    };
    for (args, says) in [
        (
            &[r#"{"answers": {"Stop?": "Yes"}}"#][..],
            "was refused, and the question stays open: the reply answers a question that was not asked: `Stop?` (asked: Go on?)",
        ),
        (
            &[r#"{"answer": "Yes"}"#][..],
            "was refused, and the question stays open: the reply has no `answers` object keyed by question",
        ),
        (
            &["--allow"][..],
            "asks a question (Go: Go on?), not permission: give the answer instead of --allow/--deny",
        ),
    ] {
        let out = answer(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Still open: the right answer is taken and the task goes on.
    let out = answer(&["Yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let resumed = env.run_with(&["resume", &task, "--provider", &provider], None, &[]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "Going on.\n");
}

#[test]
fn run_says_once_what_it_goes_without_before_it_starts() {
    let env = new_env();
    env.user_plugin(
        "broken",
        "name = \"broken\"\n\n[[contributions]]\nsurface = \"tools\"\nname = \"x\"\n",
    );
    env.write(
        ".noeta/skills/bad/SKILL.md",
        "---\nname: bad\n---\nNo description.\n",
    );
    env.write_trusted(
        ".noeta/config.toml",
        "[plugins.provider]\nprovider = \"anthropic\"\n",
    );
    let provider = env.script(json!([{ "text": "done" }]));
    let out = env.run_with(&["run", "--provider", &provider, "go"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = env.redact(&text(&out.stderr));
    for line in [
        "warning: plugin skipped: manifest file `[HOME]/.noeta/plugins/broken/noeta-plugin.toml` (plugin `broken`): contribution #1 names unknown surface `tools`",
        "warning: settings table [plugins.provider] is not used: it names no plugin or extension — did you mean `providers`?",
        "warning: skill skipped: [WORKSPACE]/.noeta/skills/bad/SKILL.md (workspace): the frontmatter has no `description`",
    ] {
        assert_eq!(err.matches(line).count(), 1, "{line:?} once in:\n{err}");
    }
    let task_line = err.find("task ").unwrap();
    assert!(
        err.find("warning: skill skipped").unwrap() < task_line,
        "before it starts: {err}"
    );
}

#[test]
fn main_hands_work_to_a_claude_code_agent_file_through_task() {
    let env = new_env();
    std::fs::write(env.workspace.join("notes.txt"), "the answer is 42\n").unwrap();
    env.write_trusted(
        ".claude/agents/note-reader.md",
        "---\nname: note-reader\ndescription: Use this agent when: notes must be read\n\
         tools: Read, LS\nmodel: haiku\ncolor: green\n---\nYou read notes.\n",
    );
    let provider = env.script_file(json!({
        "turns": [
            call("Task", json!({
                "description": "read the notes",
                "prompt": "What does notes.txt say?",
                "subagent_type": "note-reader"
            })),
            { "text": "The reader says 42." }
        ],
        "agents": { "note-reader": { "turns": [
            call("Read", json!({ "file_path": "notes.txt" })),
            { "text": "notes.txt says 42." }
        ] } }
    }));
    let out = env.run_with(
        &["run", "--provider", &provider, "what do the notes say?"],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().last(),
        Some("The reader says 42.")
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("● Read(notes.txt)"),
        "the agent file's agent read it: {err}"
    );
    let task = task_of(&out);
    let log = text(&env.run_with(&["log", &task, "--json"], None, &[]).stdout);
    assert!(log.contains("Subagent `note-reader`"), "{log}");
}

#[test]
fn a_task_remembers_its_provider_and_model_so_answer_and_resume_need_no_flags() {
    let env = new_env();
    let (base, server) = noeta_testkit::http::openai_text_server(1, "Going on.");
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    // A scripted task parks on a question; `answer` and `resume` find its provider.
    let provider = env.script(json!([
        call("AskUserQuestion", json!({ "questions": [{
            "question": "Go on?", "header": "Go", "multiSelect": false,
            "options": [
                { "label": "Yes", "description": "go on" },
                { "label": "No", "description": "stop" }
            ]
        }]})),
        { "text": "Carried on." }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "ask me"], None, &vars);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let task = task_of(&out);
    let answered = env.run_with(&["answer", &task, "Yes"], None, &vars);
    assert!(answered.status.success(), "{}", text(&answered.stderr));

    let out = env.run_with(
        &["run", "--provider", "openai", "--model", "gpt-4.1", "hello"],
        None,
        &vars,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bodies = server.join().unwrap();
    assert_eq!(bodies[0]["model"], "gpt-4.1");
    let listed = text(&env.run(&["tasks", "--json"]).stdout);
    let last: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    let log = text(
        &env.run(&["log", last["id"].as_str().unwrap(), "--json"])
            .stdout,
    );
    let started: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(
        started["data"]["host"],
        json!({ "version": 1, "provider": "openai", "model": "gpt-4.1" })
    );
    assert!(!log.contains("sk-test"), "{log}");

    // The scripted task resumes on its own provider with no flags.
    let resumed = env.run_with(&["resume", &task], None, &[]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "Carried on.\n");
}

#[test]
fn chat_task_carries_on_with_a_task_on_its_own_provider() {
    let env = new_env();
    let provider = env.script(json!([
        { "text": "First answer." },
        { "text": "Second answer." }
    ]));
    let out = env.run(&["run", "--provider", &provider, "first question"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let task = task_of(&out);
    // No provider flag: the task's own is used.
    let chat = env.run_with(
        &["chat", "--task", &task],
        Some("second question\n/exit\n"),
        &[],
    );
    let err = text(&chat.stderr);
    assert!(chat.status.success(), "{err}");
    assert!(
        err.contains(&format!("carrying on with task {task}")),
        "{err}"
    );
    assert_eq!(text(&chat.stdout), "Second answer.\n");
    let log = text(&env.run(&["log", &task, "--json"]).stdout);
    assert!(
        log.contains("first question") && log.contains("second question"),
        "{log}"
    );
    // A task that is not in the store is named.
    let missing = env.run_with(&["chat", "--task", "20990101-000000-dead"], Some(""), &[]);
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("no task `20990101-000000-dead` in this store"),
        "{}",
        text(&missing.stderr)
    );
}

/// The model writing what noeta trusts — the project's settings, `.mcp.json`, `.claude/`,
/// git's hooks — is asked about even where edits run without asking (`acceptEdits`); with
/// nobody to answer, nothing is written. Other edits run as before.
#[test]
fn the_model_is_asked_before_it_writes_what_noeta_trusts_even_under_accept_edits() {
    let env = new_env();
    let provider = env.script(json!([
        { "calls": [
            { "name": "Write", "input": { "file_path": ".noeta/config.toml", "content": "[plugins.sandbox]\nprovider = \"local\"\n" } },
            { "name": "Write", "input": { "file_path": ".mcp.json", "content": "{}" } },
            { "name": "Write", "input": { "file_path": ".claude/settings.json", "content": "{}" } },
            { "name": "Write", "input": { "file_path": "src/ok.txt", "content": "fine\n" } }
        ] },
        { "text": "done" }
    ]));
    let out = env.run_with(
        &[
            "run",
            "--permission-mode",
            "acceptEdits",
            "--provider",
            &provider,
            "edit",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains(
            "would change `.noeta` in the workspace, which decides what noeta runs and trusts"
        ),
        "{said}"
    );
    assert!(said.contains("would change `.mcp.json`"), "{said}");
    assert!(said.contains("would change `.claude`"), "{said}");
    assert!(!env.workspace.join(".noeta/config.toml").exists());
    assert!(!env.workspace.join(".mcp.json").exists());
    assert!(!env.workspace.join(".claude/settings.json").exists());
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("src/ok.txt")).unwrap(),
        "fine\n"
    );
}

#[test]
fn tasks_recorded_before_the_typed_task_run_still_answer_resume_and_list() {
    // A store written by noeta before how a task runs became a typed, versioned record: one
    // task waiting on a question (`scripted:ask.json`, a path relative to the workspace), one
    // submitted with `run --detach --permission-mode acceptEdits` in `/tmp/project`.
    let env = new_env();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/store-0.1-before-task-run");
    std::fs::create_dir_all(env.workspace.join(".noeta")).unwrap();
    std::fs::copy(
        fixture.join("noeta.db"),
        env.workspace.join(".noeta/noeta.db"),
    )
    .unwrap();
    std::fs::copy(fixture.join("ask.json"), env.workspace.join("ask.json")).unwrap();
    let listed = text(&env.run(&["tasks"]).stdout);
    assert!(
        listed.contains("20261207-195105-ccc5  main  waiting: Go: Go on?  ask me"),
        "{listed}"
    );
    assert!(listed.contains("20261207-195105-4d21  main"), "{listed}");
    // The parked one is answered and resumed on the model it recorded, with no flags.
    let answered = env.run(&["answer", "20261207-195105-ccc5", "Yes"]);
    assert!(answered.status.success(), "{}", text(&answered.stderr));
    let resumed = env.run(&["resume", "20261207-195105-ccc5"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "Carried on.\n");
    // The submitted one keeps its recorded workspace, which this machine does not have.
    let answer = env.run(&["answer", "20261207-195105-4d21", "--allow"]);
    assert!(
        text(&answer.stderr).contains("its workspace `/tmp/project` does not exist on this host"),
        "{}",
        text(&answer.stderr)
    );
}

/// A permission ask answered `n: …` tells the model why; `a` remembers a rule for the
/// workspace, so the next run's same kind of command runs without asking.
#[test]
fn no_with_a_reason_reaches_the_model_and_always_is_remembered_for_the_workspace() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let turns = json!([
        { "calls": [{ "name": "Bash", "input": { "command": "git status --short" } }] },
        { "text": "done" }
    ]);
    let provider = env.script(turns.clone());
    let out = env.run_with(
        &["run", "--provider", &provider, "look"],
        Some("n: use git diff instead\n"),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let task = task_of(&out);
    let log = text(&env.run_with(&["log", &task, "--json"], None, &[]).stdout);
    assert!(
        log.contains("the user declined this call and said: use git diff instead"),
        "{log}"
    );

    let provider = env.script(turns.clone());
    let out = env.run_with(&["run", "--provider", &provider, "look"], Some("a\n"), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("remembered for this workspace in"), "{err}");
    let kept = std::fs::read_to_string(env.home.join(".noeta/approvals.json")).unwrap();
    assert!(kept.contains("Bash(git status:*)"), "{kept}");

    // The next run asks nothing (its standard input is closed: an ask would be denied).
    let provider = env.script(turns);
    let out = env.run_with(&["run", "--provider", &provider, "look"], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("allow this call"),
        "{}",
        text(&out.stderr)
    );
    let task = task_of(&out);
    let log = text(&env.run_with(&["log", &task, "--json"], None, &[]).stdout);
    assert!(log.contains("\"kind\":\"call_finished\""), "{log}");
    assert!(!log.contains("\"outcome\":\"denied\""), "{log}");
}
