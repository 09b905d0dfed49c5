//! `noeta plugin add|list|update|remove` and `noeta plugin marketplace add`: plugins copied
//! from a git repository at a commit, a local directory or a marketplace entry, with nothing
//! in them run — not a hook of the repository, not the user's git configuration, not an
//! install script.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// Runs `git` in `dir` as a test author, failing the test when it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A git repository holding the Claude Code plugin `greeter` (and an install script that
/// must never run); its path and the first commit.
fn greeter_repo(env: &CliEnv, marker: &Path) -> (PathBuf, String) {
    let repo = env.root().join("greeter-repo");
    std::fs::create_dir_all(repo.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(repo.join("commands")).unwrap();
    std::fs::write(
        repo.join(".claude-plugin/plugin.json"),
        r#"{"name": "greeter", "version": "1.0.0"}"#,
    )
    .unwrap();
    std::fs::write(repo.join("commands/hello.md"), "Say hello to $ARGUMENTS.\n").unwrap();
    std::fs::write(
        repo.join("install.sh"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (repo, commit)
}

/// A user git configuration whose hooks and templates would leave `marker` behind.
fn hostile_git_config(env: &CliEnv, marker: &Path) {
    let hooks = env.root().join("evil-hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in ["post-checkout", "post-merge", "post-clone"] {
        let path = hooks.join(hook);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let templates = env.root().join("evil-template");
    std::fs::create_dir_all(templates.join("hooks")).unwrap();
    std::fs::copy(
        hooks.join("post-checkout"),
        templates.join("hooks/post-checkout"),
    )
    .unwrap();
    std::fs::write(
        env.home.join(".gitconfig"),
        format!(
            "[core]\n\thooksPath = {}\n[init]\n\ttemplateDir = {}\n",
            hooks.display(),
            templates.display()
        ),
    )
    .unwrap();
}

fn listed(env: &CliEnv) -> Vec<Value> {
    stdout(&env.run(&["plugin", "list", "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_git_plugin_is_installed_at_its_commit_running_nothing_and_updated_to_another() {
    let env = CliEnv::new(NOETA);
    let marker = env.root().join("something-ran");
    hostile_git_config(&env, &marker);
    let (repo, first) = greeter_repo(&env, &marker);
    let url = format!("file://{}", repo.display());

    let out = env.run(&["plugin", "add", &format!("{url}@{}", &first[..12])]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("installed greeter 1.0.0 (claude-code)"),
        "{}",
        stdout(&out)
    );
    assert!(
        !marker.exists(),
        "a hook, a template or the install script ran"
    );
    let installed = env.home.join(".noeta/plugins/greeter");
    assert!(installed.join("commands/hello.md").is_file());
    assert!(!installed.join(".git").exists());
    let records = listed(&env);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["commit"], first.as_str());
    assert_eq!(records[0]["scope"], "user");
    let first_tree = records[0]["tree"].as_str().unwrap().to_owned();

    // Installed is loaded: its command runs.
    let provider = env.script(json!([{ "text": "hi" }, { "text": "hi again" }]));
    let out = env.run(&["run", "--provider", &provider, "/greeter:hello the team"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Added twice: refused, naming what to do.
    let again = env.run(&["plugin", "add", &format!("{url}@{first}")]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("`greeter` is already installed"),
        "{}",
        stderr(&again)
    );

    // Another commit: `update` moves to it.
    std::fs::write(repo.join("commands/hello.md"), "Greet $ARGUMENTS warmly.\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    let out = env.run(&["plugin", "update", "greeter", &second]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records = listed(&env);
    assert_eq!(records[0]["commit"], second.as_str());
    assert_ne!(records[0]["tree"], first_tree.as_str());
    assert_eq!(
        std::fs::read_to_string(installed.join("commands/hello.md")).unwrap(),
        "Greet $ARGUMENTS warmly.\n"
    );
    assert!(!marker.exists());

    let out = env.run(&["plugin", "remove", "greeter"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!installed.exists());
    assert!(listed(&env).is_empty());
}

#[test]
fn bad_sources_are_named_and_install_nothing() {
    let env = CliEnv::new(NOETA);
    let marker = env.root().join("something-ran");
    let (repo, _) = greeter_repo(&env, &marker);
    let url = format!("file://{}", repo.display());
    for (source, says) in [
        (url.clone(), "a git source names the commit to install"),
        (format!("{url}@main"), "is not a commit"),
        (
            format!("{url}@0123456789abcdef"),
            "has no commit `0123456789abcdef`",
        ),
        (
            "linter@nowhere".to_owned(),
            "no marketplace `nowhere` is added",
        ),
        ("./missing-dir".to_owned(), "no such file or directory"),
    ] {
        let out = env.run(&["plugin", "add", &source]);
        assert!(!out.status.success(), "{source}");
        assert!(stderr(&out).contains(says), "{source}: {}", stderr(&out));
    }
    env.write("empty/readme.txt", "no plugin here\n");
    let out = env.run(&["plugin", "add", "empty"]);
    assert!(stderr(&out).contains("holds no plugin"), "{}", stderr(&out));
    assert!(listed(&env).is_empty());
    let plugins = env.home.join(".noeta/plugins");
    let left: Vec<_> = std::fs::read_dir(&plugins)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_local_plugin_and_a_marketplace_entry_install_into_the_right_place() {
    let env = CliEnv::new(NOETA);
    // A noeta plugin directory, installed into the project.
    env.write(
        "tools/house/noeta-plugin.toml",
        "name = \"house-style\"\nversion = \"0.2.0\"\ncontributions = []\n",
    );
    let out = env.run(&["plugin", "add", "--project", "tools/house"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        env.workspace
            .join(".noeta/plugins/house-style/noeta-plugin.toml")
            .is_file()
    );
    assert!(
        stdout(&out).contains("loads once the workspace is trusted"),
        "{}",
        stdout(&out)
    );

    // A marketplace, only read: its entry with a relative source.
    env.write(
        "market/.claude-plugin/marketplace.json",
        r#"{"name": "house", "owner": {"name": "Team"}, "plugins": [
            {"name": "linter", "source": "./plugins/linter", "description": "Lints"},
            {"name": "remote", "source": {"source": "github", "repo": "example/remote"}}]}"#,
    );
    env.write(
        "market/plugins/linter/commands/lint.md",
        "Lint $ARGUMENTS.\n",
    );
    let out = env.run(&["plugin", "marketplace", "add", "market"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["plugin", "marketplace", "list"]);
    assert!(stdout(&out).contains("  linter  Lints"), "{}", stdout(&out));
    let out = env.run(&["plugin", "add", "linter@house"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        env.home
            .join(".noeta/plugins/linter/commands/lint.md")
            .is_file()
    );
    let out = env.run(&["plugin", "add", "remote@house"]);
    assert!(
        stderr(&out).contains("its git source names no commit (`sha`)"),
        "{}",
        stderr(&out)
    );
    let records = listed(&env);
    let names: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["scope"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("linter", "user"), ("house-style", "project")]);
    assert_eq!(records[0]["marketplace"], "house");
}

#[test]
fn reload_plugins_keeps_an_in_memory_task_and_its_next_turn_records_the_new_pins() {
    let env = CliEnv::new(NOETA);
    let plugin = env.home.join(".noeta/plugins/house");
    env.write(
        plugin.join("noeta-plugin.toml").to_str().unwrap(),
        "name = \"house\"\nadd-to = \"*\"\ncontributions = []\n",
    );
    env.write(plugin.join("helper.py").to_str().unwrap(), "print(1)\n");
    let edit = format!(
        "printf 'print(2)\\n' > {}",
        plugin.join("helper.py").display()
    );
    let provider = env.script(json!([
        { "text": "first" },
        { "calls": [{ "id": "e1", "name": "Bash", "input": { "command": edit } }] },
        { "text": "edited" },
        { "text": "second" }
    ]));
    let out = env.run_with(
        &[
            "chat",
            "--json",
            "--store",
            "memory:",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
        ],
        Some("hi\nedit the helper\n/reload-plugins\nagain\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("plugins reloaded"),
        "{}",
        stderr(&out)
    );
    let events: Vec<Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let pins: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "plugins_pinned")
        .map(|e| {
            e["data"]["pins"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "house")
                .map(|p| p["version"].as_str().unwrap().to_owned())
                .unwrap()
        })
        .collect();
    assert_eq!(pins.len(), 2, "{pins:?}");
    assert_ne!(pins[0], pins[1]);
    let replies: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "assistant_reply")
        .filter_map(|e| e["data"]["text"].as_str())
        .collect();
    assert_eq!(replies, ["first", "", "edited", "second"]);
}

/// A Claude Code plugin laid out as published collections are, with a symbolic link at its
/// root to a file of its own (`CLAUDE.md -> AGENTS.md`).
fn linked_plugin(env: &CliEnv, dir: &str) -> PathBuf {
    let root = env.root().join(dir);
    std::fs::create_dir_all(root.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(root.join("commands")).unwrap();
    std::fs::write(
        root.join(".claude-plugin/plugin.json"),
        r#"{"name": "linked", "version": "2.0.0"}"#,
    )
    .unwrap();
    std::fs::write(root.join("commands/plan.md"), "Plan $ARGUMENTS.\n").unwrap();
    std::fs::write(root.join("AGENTS.md"), "Work in small steps.\n").unwrap();
    std::os::unix::fs::symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
    root
}

#[test]
fn a_link_to_a_file_inside_the_plugin_is_installed_as_that_file_from_a_directory_git_and_a_marketplace()
 {
    let env = CliEnv::new(NOETA);
    let installed = |env: &CliEnv| env.home.join(".noeta/plugins/linked");
    let check = |env: &CliEnv| {
        let copy = installed(env).join("CLAUDE.md");
        let meta = std::fs::symlink_metadata(&copy).unwrap();
        assert!(meta.is_file(), "installed as a regular file, not a link");
        assert_eq!(
            std::fs::read_to_string(copy).unwrap(),
            "Work in small steps.\n"
        );
        assert!(installed(env).join("commands/plan.md").is_file());
    };

    // A directory.
    let dir = linked_plugin(&env, "linked-dir");
    let out = env.run(&["plugin", "add", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    check(&env);
    let out = env.run(&["plugin", "remove", "linked"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // The same from git, which keeps the link as a link.
    let repo = linked_plugin(&env, "linked-repo");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let source = format!("file://{}@{commit}", repo.display());
    let out = env.run(&["plugin", "add", &source]);
    assert!(out.status.success(), "{}", stderr(&out));
    check(&env);
    let out = env.run(&["plugin", "remove", "linked"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A marketplace whose root carries the link, its plugin in a subdirectory.
    let market = env.root().join("linked-market");
    std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
    std::fs::write(
        market.join(".claude-plugin/marketplace.json"),
        r#"{"name": "collection", "owner": {"name": "Team"}, "plugins": [
            {"name": "linked", "source": "./plugins/linked"}]}"#,
    )
    .unwrap();
    std::fs::write(market.join("CLAUDE.md"), "The collection.\n").unwrap();
    std::os::unix::fs::symlink("CLAUDE.md", market.join("AGENTS.md")).unwrap();
    let plugin = linked_plugin(&env, "linked-market/plugins/linked");
    assert!(plugin.is_dir());
    let out = env.run(&["plugin", "marketplace", "add", market.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["plugin", "add", "linked@collection"]);
    assert!(out.status.success(), "{}", stderr(&out));
    check(&env);
}

/// Plants a symbolic link in a plugin's root.
type Plant<'a> = dyn Fn(&Path) + 'a;

#[test]
fn a_link_out_of_the_plugin_to_a_directory_in_a_loop_or_dangling_is_refused_naming_it() {
    let env = CliEnv::new(NOETA);
    let outside = env.write("secret.txt", "not the plugin's\n");
    let cases: [(&str, &Plant<'_>, &str); 4] = [
        (
            "out",
            &|root: &Path| std::os::unix::fs::symlink(&outside, root.join("notes.md")).unwrap(),
            "outside the plugin",
        ),
        (
            "dir",
            &|root: &Path| std::os::unix::fs::symlink("commands", root.join("more")).unwrap(),
            "which is not a regular file",
        ),
        (
            "loop",
            &|root: &Path| {
                std::os::unix::fs::symlink("b.md", root.join("a.md")).unwrap();
                std::os::unix::fs::symlink("a.md", root.join("b.md")).unwrap();
            },
            "that cannot be followed",
        ),
        (
            "dangling",
            &|root: &Path| std::os::unix::fs::symlink("gone.md", root.join("notes.md")).unwrap(),
            "that cannot be followed",
        ),
    ];
    for (name, plant, says) in cases {
        let root = linked_plugin(&env, &format!("bad-{name}"));
        plant(&root);
        let out = env.run(&["plugin", "add", root.to_str().unwrap()]);
        assert!(!out.status.success(), "{name}");
        let err = stderr(&out);
        assert!(err.contains("a symbolic link"), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            err.contains(&format!("bad-{name}/")),
            "{name}: names the link: {err}"
        );
        assert!(listed(&env).is_empty(), "{name}: nothing installed");
        assert!(!env.home.join(".noeta/plugins/linked").exists(), "{name}");
    }
}
