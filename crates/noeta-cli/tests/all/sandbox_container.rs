//! The container sandbox through the real `noeta run` (built with the `container` feature):
//! the agent's commands run in the task's container, which shares only the workspace and is
//! removed when the turn ends; `noeta sandbox prune` removes what a workspace left behind.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use noeta_testkit::container::{engine, engine_out, image};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// A workspace whose settings choose the container sandbox on the test image.
fn container_env() -> CliEnv {
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".noeta/config.toml",
        &format!(
            "[plugins.sandbox]\nprovider = \"container\"\nengine = \"{}\"\nimage = \"{}\"\n",
            engine(),
            image()
        ),
    );
    env
}

/// The names of the containers labelled with `workspace`.
fn containers_of(env: &CliEnv) -> Vec<String> {
    let workspace = std::fs::canonicalize(&env.workspace).unwrap();
    let label = format!("label=noeta.workspace={}", workspace.display());
    let out = engine_out(&["ps", "--all", "--filter", &label, "--format", "{{.Names}}"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_run_works_in_its_container_and_leaves_none_behind() {
    let env = container_env();
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": {
            "command": "echo inside > made.txt; ls /; test -e /usr && echo HOST-ROOT; true"
        } }] },
        { "text": "done" }
    ]));
    let out = env.run_with(
        &[
            "run",
            "--store",
            "memory:",
            "--permission-mode",
            "bypassPermissions",
            "--json",
            "--provider",
            &provider,
            "go",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["kind"] == "call_finished")
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no finished call in {}", stdout(&out)));
    assert!(text.contains("bin"), "{text}");
    assert!(
        !text.contains("HOST-ROOT"),
        "the host's root is visible: {text}"
    );
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("made.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(containers_of(&env), Vec::<String>::new());
}

#[test]
fn prune_removes_a_container_a_workspace_left_behind() {
    let env = container_env();
    let workspace = std::fs::canonicalize(&env.workspace).unwrap();
    let name = format!("noeta-left-{}", std::process::id());
    let made = engine_out(&[
        "run",
        "--detach",
        "--name",
        &name,
        "--label",
        &format!("noeta.workspace={}", workspace.display()),
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        image(),
        "sleep",
        "600",
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = env.run(&["sandbox", "prune"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("removed {name}"));
    assert_eq!(containers_of(&env), Vec::<String>::new());
    let again = env.run(&["sandbox", "prune"]);
    assert_eq!(
        stdout(&again).trim(),
        "sandbox `container`: nothing to remove"
    );
}

#[test]
fn without_an_image_the_run_is_refused_naming_the_setting() {
    let env = CliEnv::new(NOETA);
    let out = env.run(&[
        "run",
        "--sandbox",
        "container",
        "--store",
        "memory:",
        "--provider",
        "scripted",
        "go",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("[plugins.sandbox] image"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_task_waiting_for_a_person_keeps_its_container_and_resume_finds_it() {
    let env = container_env();
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "echo kept > /root/mark" } }] },
        { "calls": [{ "name": "AskUserQuestion", "input": { "questions": [{
            "question": "Go on?", "header": "Go", "multiSelect": false,
            "options": [
                { "label": "Yes", "description": "go on" },
                { "label": "No", "description": "stop" }
            ]
        }]} }] },
        { "calls": [{ "name": "Bash", "input": { "command": "cat /root/mark" } }] },
        { "text": "done" }
    ]));
    let mode = [
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
    ];
    let mut args = vec!["run"];
    args.extend(mode);
    args.push("go");
    let out = env.run(&args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let task = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("task ")
                .map(|r| r.split(' ').next().unwrap().to_owned())
        })
        .unwrap_or_else(|| panic!("no task id in {err}"));
    // Waiting for an answer, the task keeps its container (and what it wrote outside the
    // workspace).
    assert_eq!(containers_of(&env).len(), 1, "{err}");
    let answered = env.run(&["answer", &task, "--provider", &provider, "Yes"]);
    assert!(answered.status.success(), "{}", stderr(&answered));
    let mut args = vec!["resume", task.as_str(), "--json"];
    args.extend(mode);
    let resumed = env.run(&args);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let texts: Vec<String> = stdout(&resumed)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "call_finished")
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(texts.iter().any(|t| t.contains("kept")), "{texts:?}");
    assert_eq!(containers_of(&env), Vec::<String>::new());
}
