//! File snapshots of what a person reads from the `noeta` binary: the help of every command,
//! the plugin listing and check, `doctor`, and one error message of each family (manifest,
//! settings, agent file, SKILL.md, trust).
//!
//! Each snapshot holds the command, its exit code, standard output and standard error, with
//! the temporary home and workspace written as `[HOME]` and `[WORKSPACE]`. A changed snapshot
//! fails the test; `cargo insta review` (or `INSTA_UPDATE=always`) accepts a new one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};

fn env() -> CliEnv {
    CliEnv::new(env!("CARGO_BIN_EXE_noeta"))
}

/// The command, its exit code and both outputs, redacted.
fn shot(env: &CliEnv, args: &[&str]) -> String {
    let out = env.run(args);
    let code = out
        .status
        .code()
        .map_or_else(|| "signal".to_owned(), |c| c.to_string());
    env.redact(&format!(
        "$ noeta {}\nexit: {code}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        stdout(&out),
        stderr(&out)
    ))
}

#[test]
fn help_of_every_command() {
    let env = env();
    let commands: [&[&str]; 25] = [
        &["--help"],
        &["run", "--help"],
        &["chat", "--help"],
        &["resume", "--help"],
        &["tasks", "--help"],
        &["log", "--help"],
        &["answer", "--help"],
        &["doctor", "--help"],
        &["surfaces", "--help"],
        &["plugins", "--help"],
        &["plugins", "list", "--help"],
        &["plugins", "check", "--help"],
        &["plugin", "--help"],
        &["plugin", "add", "--help"],
        &["plugin", "update", "--help"],
        &["plugin", "marketplace", "--help"],
        &["skills", "--help"],
        &["skills", "list", "--help"],
        &["mcp", "--help"],
        &["mcp", "list", "--help"],
        &["store", "--help"],
        &["store", "check", "--help"],
        &["store", "salvage", "--help"],
        &["trust", "--help"],
        &["help"],
    ];
    for args in commands {
        let command: Vec<&str> = args.iter().copied().filter(|a| *a != "--help").collect();
        let name = match command.as_slice() {
            [] => "help_noeta".to_owned(),
            ["help"] => "help_the_help_command".to_owned(),
            words => format!("help_{}", words.join("_")),
        };
        let text = shot(&env, args);
        assert!(
            text.contains("exit: 0"),
            "`noeta {}` exits 0: {text}",
            args.join(" ")
        );
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn plugins_list_of_the_builtins() {
    insta::assert_snapshot!(shot(&env(), &["plugins", "list"]));
}

#[test]
fn plugins_check_of_the_builtins_with_resolution() {
    insta::assert_snapshot!(shot(&env(), &["plugins", "check", "--resolve"]));
}

#[test]
fn doctor_in_an_empty_workspace_without_a_model() {
    insta::assert_snapshot!(shot(&env(), &["doctor"]));
}

#[test]
fn a_broken_manifest_is_named_by_file_plugin_and_entry() {
    let env = env();
    env.user_plugin(
        "broken",
        "name = \"broken\"\nversion = \"1.0.0\"\n\n[[contributions]]\nsurface = \"tools\"\nname = \"x\"\n",
    );
    insta::assert_snapshot!(shot(&env, &["plugins", "check"]));
}

#[test]
fn an_unknown_settings_key_is_named_with_its_file_and_the_known_keys() {
    let env = env();
    env.write_trusted(".noeta/config.toml", "modle = \"opus\"\n");
    insta::assert_snapshot!(shot(&env, &["run", "hello"]));
}

#[test]
fn a_model_key_at_the_top_level_says_where_it_belongs_and_the_demo_still_runs() {
    let env = env();
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(env.home.join(".noeta/config.toml"), "model = \"opus\"\n").unwrap();
    insta::assert_snapshot!(shot(&env, &["run", "hello"]));
    // The demo runs on noeta's own defaults, whatever the user's settings say.
    let out = env.command(&["demo"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `noeta log` reads as the conversation: the goal, the replies, each call with its result's
/// first lines (a refused one, a failed one, a long one cut), and the end.
#[test]
fn log_is_a_transcript_of_the_conversation() {
    let env = env();
    env.write("notes.txt", "alpha\nbeta\n");
    env.write(
        "long.txt",
        &(1..=20).map(|n| format!("line {n}\n")).collect::<String>(),
    );
    let provider = env.script(serde_json::json!([
        {
            "text": "Let me look at the notes.",
            "calls": [
                { "name": "Read", "input": { "file_path": "notes.txt" } },
                { "name": "Read", "input": { "file_path": "long.txt" } },
                { "name": "Read", "input": { "file_path": "missing.txt" } }
            ]
        },
        { "text": "The notes say alpha and beta.\nThe long file counts to twenty." }
    ]));
    let out = env.run(&[
        "run",
        "--provider",
        &provider,
        "what do the notes say?\nand the long file?",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!(shot(&env, &["log", "--last"]));
}

#[test]
fn a_broken_agent_file_is_named_with_line_and_column() {
    let env = env();
    env.write_trusted(
        ".noeta/agents/reviewer.md",
        "---\nname: [unclosed\ndescription: Reviews\n---\nReview the change.\n",
    );
    insta::assert_snapshot!(shot(&env, &["run", "--agent", "reviewer", "hello"]));
}

#[test]
fn a_skill_md_without_a_description_is_listed_as_skipped_with_why() {
    let env = env();
    env.write(
        ".noeta/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy the service.\n---\nSteps.\n",
    );
    env.write(
        ".noeta/skills/broken/SKILL.md",
        "---\nname: broken\n---\nNo description.\n",
    );
    insta::assert_snapshot!(shot(&env, &["skills", "list"]));
}

#[test]
fn trusting_a_directory_that_does_not_exist_names_it() {
    let env = env();
    let missing = env.workspace.join("no-such-dir");
    insta::assert_snapshot!(shot(&env, &["trust", missing.to_str().unwrap()]));
}

#[test]
fn noeta_alone_prints_where_to_start_and_every_command_help_has_examples() {
    let env = env();
    let out = env.run(&[]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.starts_with("noeta — a durable agent runtime"),
        "{text}"
    );
    assert!(text.contains("noeta demo"), "{text}");
    for command in [
        "run", "demo", "chat", "resume", "tasks", "log", "answer", "mcp", "store", "doctor",
        "surfaces", "plugin", "plugins", "agents", "skills", "trust",
    ] {
        let help = stdout(&env.run(&[command, "--help"]));
        assert!(
            help.contains("Examples:\n  noeta "),
            "`noeta {command} --help`: {help}"
        );
    }
}
