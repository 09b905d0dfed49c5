//! The host operations (`noeta::Tasks`) a frontend calls, and the typed record of how a task
//! runs (`noeta::TaskRun`), read back from what hosts recorded before it existed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;

use futures::executor::block_on;
use noeta::tasks::{Answer, TaskOpError};
use noeta::{HostConfig, HostPaths, Settings, TaskRun, Tasks};
use noeta_core::runner::RunOutcome;
use noeta_core::store::TaskId;
use serde_json::{Value, json};

fn paths(root: &tempfile::TempDir) -> HostPaths {
    let home = root.path().join("home");
    let workspace = root.path().join("workspace");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    HostPaths {
        home: Some(home),
        workspace,
    }
}

/// Host operations over an in-memory store, each host configured as a plain embedder's.
fn tasks(paths: &HostPaths) -> Tasks {
    let stores = noeta::open_store(paths, Some("memory:")).unwrap();
    Tasks::new(
        paths.clone(),
        stores,
        Arc::new(|paths: HostPaths, run: &TaskRun| {
            let mut flags = Settings::default();
            if let Some(mode) = &run.permission_mode {
                flags.set_param("governance", "permission_mode", json!(mode))?;
            }
            Ok(HostConfig {
                flags,
                worker: "embedder".into(),
                ..HostConfig::new(paths)
            })
        }),
    )
}

fn script(paths: &HostPaths, turns: Value) -> String {
    let file = paths.workspace.join("script.json");
    std::fs::write(&file, json!({ "turns": turns }).to_string()).unwrap();
    "scripted:script.json".to_owned()
}

fn scripted(provider: &str) -> TaskRun {
    TaskRun {
        provider: Some(provider.to_owned()),
        ..TaskRun::default()
    }
}

#[test]
fn submitting_opens_each_host_once_and_no_model_and_a_runner_opens_one() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let provider = script(&paths, json!([{ "text": "Done." }]));
    // No key for any provider: submitting needs none.
    let tasks = tasks(&paths);
    let first = block_on(tasks.submit(scripted(&provider), "one")).unwrap();
    let second = block_on(tasks.submit(scripted(&provider), "two")).unwrap();
    let other_agent = block_on(tasks.submit(
        TaskRun {
            agent: Some("general-purpose".into()),
            ..TaskRun::default()
        },
        "three",
    ))
    .unwrap();
    assert_eq!(tasks.opened().hosts, 1, "one host for the workspace");
    assert_eq!(tasks.opened().models, 0, "submitting opens no model");

    // Each is recorded as it runs, with its script made absolute and queued.
    let run = block_on(TaskRun::of_task(tasks.stores().log.as_ref(), &first)).unwrap();
    assert!(run.queued);
    assert_eq!(run.workspace.as_deref(), Some(paths.workspace.as_path()));
    assert_eq!(
        run.provider,
        Some(format!(
            "scripted:{}",
            paths.workspace.join("script.json").display()
        ))
    );
    let other = block_on(TaskRun::of_task(tasks.stores().log.as_ref(), &other_agent)).unwrap();
    assert_eq!(other.agent(), "general-purpose");
    assert_eq!(other.provider, None, "the worker's provider");

    // A message, a state and a cancel reuse the host and open no model.
    block_on(tasks.cancel(&second, "not needed")).unwrap();
    let state = block_on(tasks.state(&second)).unwrap();
    assert!(state.core.task_failed.is_some(), "{:?}", state.core.turn);
    assert_eq!(tasks.opened().hosts, 1);
    assert_eq!(tasks.opened().models, 0);

    // Running one opens its model once, for every task of that run.
    let runner = block_on(tasks.runner(&first)).unwrap();
    let again = block_on(tasks.runner(&first)).unwrap();
    assert!(Arc::ptr_eq(&runner, &again));
    assert_eq!(tasks.opened().models, 1);
    let ran = block_on(
        runner
            .runtime
            .run(&runner.host.session("main").unwrap(), &first),
    )
    .unwrap();
    assert!(matches!(ran, RunOutcome::Ended { .. }), "{ran:?}");
    assert_eq!(tasks.opened().hosts, 1);
}

#[test]
fn a_new_permission_mode_opens_a_second_host_and_bad_requests_are_named() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let tasks = tasks(&paths);
    block_on(tasks.submit(TaskRun::default(), "one")).unwrap();
    block_on(tasks.submit(
        TaskRun {
            permission_mode: Some("plan".into()),
            ..TaskRun::default()
        },
        "two",
    ))
    .unwrap();
    assert_eq!(tasks.opened().hosts, 2, "settings differ: a host each");

    let empty = block_on(tasks.submit(TaskRun::default(), "  ")).unwrap_err();
    assert!(matches!(empty, TaskOpError::Invalid(_)), "{empty}");
    let nobody = block_on(tasks.submit(TaskRun::of_agent("nobody"), "x")).unwrap_err();
    assert!(
        nobody.to_string().contains("no agent named `nobody`"),
        "{nobody}"
    );
    let unknown = TaskId::new("no-such-task").unwrap();
    let err = block_on(tasks.message(&unknown, "hi")).unwrap_err();
    assert!(matches!(err, TaskOpError::Unknown(_)), "{err}");
    assert_eq!(err.to_string(), "no task `no-such-task` in this store");
    let elsewhere = TaskRun {
        workspace: Some(root.path().join("gone")),
        ..TaskRun::default()
    };
    let err = block_on(tasks.submit(elsewhere, "x")).unwrap_err();
    assert!(
        err.to_string().contains("does not exist on this host"),
        "{err}"
    );
    // Nothing of the refused ones was recorded.
    assert_eq!(block_on(tasks.stores().log.tasks()).unwrap().len(), 2);
}

#[test]
fn an_answer_reaches_a_parked_task_without_a_model() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let provider = script(
        &paths,
        json!([
            { "calls": [{ "name": "AskUserQuestion", "input": { "questions": [{
                "question": "Go on?", "header": "Go", "multiSelect": false,
                "options": [
                    { "label": "Yes", "description": "go on" },
                    { "label": "No", "description": "stop" }
                ]
            }]}}]},
            { "text": "Carried on." }
        ]),
    );
    let tasks = tasks(&paths);
    let task = block_on(tasks.submit(scripted(&provider), "ask me")).unwrap();
    let runner = block_on(tasks.runner(&task)).unwrap();
    let parked = block_on(
        runner
            .runtime
            .run(&runner.host.session("main").unwrap(), &task),
    )
    .unwrap();
    let RunOutcome::Parked { call_id, .. } = parked else {
        panic!("{parked:?}")
    };
    let state = block_on(tasks.state(&task)).unwrap();
    let answer = noeta::tasks::typed_answer(&state, &call_id, "Yes").unwrap();
    assert_eq!(answer, json!({ "answers": { "Go on?": "Yes" } }));
    let wrong = block_on(tasks.answer(&task, &call_id, Answer::Allow(true))).unwrap_err();
    assert!(matches!(wrong, TaskOpError::Run(_)), "{wrong}");
    block_on(tasks.answer(&task, &call_id, Answer::Reply(answer))).unwrap();
    let ended = block_on(
        runner
            .runtime
            .run(&runner.host.session("main").unwrap(), &task),
    )
    .unwrap();
    assert!(matches!(ended, RunOutcome::Ended { .. }), "{ended:?}");
    assert_eq!(tasks.opened().models, 1);
}

/// The `task_started` data hosts wrote before the typed record, byte for byte as a store of
/// that time holds them (`crates/noeta-cli/tests/fixtures/store-0.1-before-task-run` has the
/// store they come from).
const BEFORE: [&str; 2] = [
    r#"{"agent":"main","host":{"model":"scripted","provider":"scripted:ask.json"}}"#,
    r#"{"agent":"main","host":{"model":"scripted","permission_mode":"acceptEdits","provider":"scripted:/tmp/project/queued.json","queued":true,"workspace":"/tmp/project"}}"#,
];

#[test]
fn runs_recorded_before_the_type_existed_read_the_same() {
    let task = TaskId::new("t").unwrap();
    let run = TaskRun::from_started(&task, &serde_json::from_str(BEFORE[0]).unwrap()).unwrap();
    assert_eq!(
        run,
        TaskRun {
            agent: Some("main".into()),
            provider: Some("scripted:ask.json".into()),
            model: Some("scripted".into()),
            ..TaskRun::default()
        }
    );
    let run = TaskRun::from_started(&task, &serde_json::from_str(BEFORE[1]).unwrap()).unwrap();
    assert_eq!(
        run,
        TaskRun {
            agent: Some("main".into()),
            provider: Some("scripted:/tmp/project/queued.json".into()),
            model: Some("scripted".into()),
            workspace: Some("/tmp/project".into()),
            permission_mode: Some("acceptEdits".into()),
            sandbox: None,
            queued: true,
        }
    );
    // Written again it carries its version, and reads back to itself.
    let facts = run.facts();
    assert_eq!(
        facts.to_string(),
        r#"{"model":"scripted","permission_mode":"acceptEdits","provider":"scripted:/tmp/project/queued.json","queued":true,"version":1,"workspace":"/tmp/project"}"#
    );
    let again = TaskRun::from_started(&task, &json!({ "agent": "main", "host": facts })).unwrap();
    assert_eq!(again, run);
    // A record without any host facts is a plain run of its agent.
    assert_eq!(
        TaskRun::from_started(&task, &json!({ "agent": "explore" })).unwrap(),
        TaskRun::of_agent("explore")
    );
}

#[test]
fn a_later_version_or_a_fact_of_the_wrong_type_is_named() {
    let task = TaskId::new("t-1").unwrap();
    let later = TaskRun::from_started(&task, &json!({ "host": { "version": 2 } })).unwrap_err();
    assert_eq!(
        later.to_string(),
        "task t-1: how it runs cannot be read from its `task_started` record: `host.version` is 2; this noeta reads up to 1 (a later noeta made it)"
    );
    let wrong = TaskRun::from_started(&task, &json!({ "host": { "provider": 7 } })).unwrap_err();
    assert!(
        wrong.to_string().ends_with("`provider` is 7, not a string"),
        "{wrong}"
    );
    let queued = TaskRun::from_started(&task, &json!({ "host": { "queued": "yes" } })).unwrap_err();
    assert!(
        queued
            .to_string()
            .ends_with("`host.queued` is \"yes\", not a boolean"),
        "{queued}"
    );
    let host = TaskRun::from_started(&task, &json!({ "host": [1] })).unwrap_err();
    assert!(
        host.to_string().ends_with("`host` is [1], not an object"),
        "{host}"
    );
}
