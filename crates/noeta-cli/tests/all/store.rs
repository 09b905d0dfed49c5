//! A damaged store: `noeta store check` says what is wrong, `noeta store salvage` copies what is
//! readable into a new file and never touches the old one, the everyday commands name the file
//! and what to do, and a store that can only be read can be listed and read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

/// A workspace with two finished tasks whose goals (each about two kilobytes: recorded in the
/// log itself, not spilled to the content store) carry a marker; their ids.
fn two_tasks() -> (CliEnv, Vec<String>) {
    tasks(&["FIRST", "SECOND"])
}

/// A store with one finished task per goal, in order; their ids in that order.
fn tasks(goals: &[&str]) -> (CliEnv, Vec<String>) {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let provider = env.script(json!([{ "text": "Done." }]));
    for goal in goals {
        let goal = format!("GOAL-{goal}-{}", "y".repeat(2_000));
        let out = env.run(&["run", "--provider", &provider, &goal]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let listed = env.run(&["tasks", "--json"]);
    let ids = stdout(&listed)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    (env, ids)
}

fn db(env: &CliEnv) -> std::path::PathBuf {
    env.workspace.join(".noeta/noeta.db")
}

#[test]
fn a_sound_store_checks_clean_in_text_and_json() {
    let (env, _) = two_tasks();
    let out = env.run(&["store", "check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("store {} is sound: 2 task(s)", db(&env).display())),
        "{}",
        stdout(&out)
    );
    let out = env.run(&["store", "check", "--json"]);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["sound"], json!(true));
    assert_eq!(report["tasks"], json!(2));
    assert_eq!(report["problems"], json!([]));
}

#[test]
fn a_damaged_store_is_named_checked_and_salvaged_without_touching_it() {
    // A task between the damaged one and the one read back, so the page zeroed cannot hold
    // rows of the last, whatever the rows' sizes.
    let (env, ids) = tasks(&["FIRST", "MIDDLE", "SECOND"]);
    noeta_testkit::damage::zero_page_holding(&db(&env), "GOAL-FIRST-");
    let before = std::fs::read(db(&env)).unwrap();

    let out = env.run(&["log", &ids[0]]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("`{}` is damaged", db(&env).display()))
            && err.contains("noeta store check")
            && err.contains("noeta store salvage"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let out = env.run(&["store", "check"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("is damaged"), "{text}");
    assert!(text.contains(&format!("task `{}`: ", ids[0])), "{text}");

    let out = env.run(&["store", "salvage", "saved.db"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "something was lost: {text}");
    assert!(
        text.contains(&format!("task `{}`: its first", ids[0])),
        "{text}"
    );
    assert_eq!(
        std::fs::read(db(&env)).unwrap(),
        before,
        "the damaged store was changed"
    );

    // The copy is sound, and the last task reads back whole from it.
    let out = env.run(&["store", "check", "--store", "sqlite:saved.db"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = env.run(&["log", &ids[2], "--store", "sqlite:saved.db"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("GOAL-SECOND-"), "{}", stdout(&out));

    // A second salvage onto the same name refuses to replace it.
    let out = env.run(&["store", "salvage", "saved.db"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("saved.db` exists"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn checking_what_has_no_file_is_an_error_naming_it() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let out = env.run(&["store", "check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("there is no store file"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["store", "check", "--store", "memory:"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("held in memory"), "{}", stderr(&out));
    std::fs::write(
        env.workspace.join("notes.txt"),
        "not a store at all, just some words",
    )
    .unwrap();
    let out = env.run(&["store", "salvage", "new.db", "--store", "sqlite:notes.txt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not a noeta store"),
        "{}",
        stderr(&out)
    );
    assert!(!env.workspace.join("new.db").exists());
}

/// `noeta ARGS` run by a user who cannot write the workspace: `nobody` when the tests run as
/// root (root writes whatever the permissions say), else the user running the tests.
fn as_reader(env: &CliEnv, args: &[&str]) -> Output {
    let root_runs = std::fs::metadata(env.root()).unwrap().uid() == 0;
    let mut command = if root_runs {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_noeta"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_noeta"))
    };
    command
        .args(args)
        .current_dir(&env.workspace)
        .env("HOME", &env.home)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY");
    command
        .output()
        .expect("setpriv (util-linux) runs the binary as another user")
}

#[test]
fn a_store_that_can_only_be_read_is_listed_and_read_and_refuses_writes_by_name() {
    let (env, ids) = two_tasks();
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // Everyone may enter and read; nobody but the owner may write, and the store not even it.
    mode(env.root(), 0o755);
    mode(&env.home, 0o755);
    mode(&env.workspace, 0o555);
    mode(&env.workspace.join(".noeta"), 0o555);
    mode(&db(&env), 0o444);
    mode(&env.workspace.join("script.json"), 0o444);

    let out = as_reader(&env, &["tasks"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&ids[1]), "{}", stdout(&out));
    let out = as_reader(&env, &["log", &ids[1]]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("GOAL-SECOND-"), "{}", stdout(&out));
    let out = as_reader(&env, &["store", "check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    let script = env.workspace.join("script.json");
    let provider = format!("scripted:{}", script.display());
    let out = as_reader(&env, &["run", "--provider", &provider, "one more"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is open read-only"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    mode(&env.workspace, 0o755);
    mode(&env.workspace.join(".noeta"), 0o755);
}

#[test]
fn commands_that_only_read_never_make_a_store() {
    let env = noeta_testkit::cli::CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let out = env.run(&["tasks"]);
    assert!(out.status.success(), "{}", noeta_testkit::cli::stderr(&out));
    assert!(noeta_testkit::cli::stderr(&out).contains("no tasks in this store yet"));
    for args in [
        &["log", "20261207-000000-abcd"][..],
        &["resume", "--last"][..],
        &["answer", "20261207-000000-abcd", "--allow"][..],
    ] {
        let out = env.run(args);
        assert!(!out.status.success(), "{args:?}");
    }
    assert!(
        !env.workspace.join(".noeta").exists(),
        "a command that only reads made .noeta/"
    );
}

#[test]
fn the_first_run_keeps_its_store_out_of_git_and_says_so_once() {
    let env = noeta_testkit::cli::CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let provider = env.script(serde_json::json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", noeta_testkit::cli::stderr(&out));
    assert!(
        noeta_testkit::cli::stderr(&out).contains("note: wrote .noeta/.gitignore"),
        "{}",
        noeta_testkit::cli::stderr(&out)
    );
    let ignore = std::fs::read_to_string(env.workspace.join(".noeta/.gitignore")).unwrap();
    for line in ["noeta.db", "noeta.db-*", "transcripts/"] {
        assert!(ignore.lines().any(|l| l == line), "{ignore}");
    }
    assert!(!ignore.contains("config.toml"), "{ignore}");
    let out = env.run(&["run", "--provider", &provider, "hello again"]);
    assert!(out.status.success(), "{}", noeta_testkit::cli::stderr(&out));
    assert!(!noeta_testkit::cli::stderr(&out).contains(".gitignore"));
    // git really ignores the store, and not the settings.
    std::fs::write(env.workspace.join(".noeta/config.toml"), "").unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.workspace)
        .status()
        .unwrap();
    assert!(status.success());
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(&env.workspace)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listed.contains(".noeta/config.toml"), "{listed}");
    assert!(!listed.contains("noeta.db"), "{listed}");
}

#[test]
fn log_last_shows_the_latest_task_as_resume_last_picks_it() {
    let env = noeta_testkit::cli::CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let out = env.run(&["log", "--last"]);
    assert!(!out.status.success());
    assert!(
        noeta_testkit::cli::stderr(&out).contains("no task in this store yet"),
        "{}",
        noeta_testkit::cli::stderr(&out)
    );
    let provider = env.script(serde_json::json!([{ "text": "hi" }]));
    for goal in ["first goal", "second goal"] {
        let out = env.run(&["run", "--provider", &provider, goal]);
        assert!(out.status.success(), "{}", noeta_testkit::cli::stderr(&out));
    }
    let out = env.run(&["log", "--last", "--json"]);
    assert!(out.status.success(), "{}", noeta_testkit::cli::stderr(&out));
    let log = noeta_testkit::cli::stdout(&out);
    assert!(
        log.contains("second goal") && !log.contains("first goal"),
        "{log}"
    );
    let out = env.run(&["log"]);
    assert!(!out.status.success(), "a task or --last is required");
}
