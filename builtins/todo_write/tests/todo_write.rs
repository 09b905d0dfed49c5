//! `TodoWrite` through the real runtime: schema, limits, the recorded list, its fold and `/todos`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::Session;
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_testkit::harness::session_of;
use noeta_toolkit::todos::{self, TodoStatus};
use serde_json::{Value, json};

fn session() -> Session {
    session_of(
        vec![noeta_builtin_todo_write::plugin()],
        &["todo_write"],
        &Default::default(),
    )
}

fn run(todos: Value) -> (Runtime, Session, TaskId) {
    let turns = json!({ "turns": [
        { "calls": [{ "name": "TodoWrite", "input": { "todos": todos } }] },
        { "text": "planned" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    let log = Arc::new(MemoryEventLog::new(ManualClock::at(0)));
    let rt = Runtime::new(log, Arc::new(MemoryContentStore::new()), Arc::new(provider));
    let s = session();
    let t = TaskId::new("plan").unwrap();
    block_on(rt.create(&s, &t, "plan the release")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    (rt, s, t)
}

fn result(rt: &Runtime, s: &Session, t: &TaskId) -> (String, bool) {
    let state = block_on(rt.load(s, t)).unwrap();
    let m = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    (m.text.to_string(), m.is_error)
}

fn item(content: &str, status: &str) -> Value {
    json!({ "content": content, "status": status, "activeForm": format!("{content}ing") })
}

#[test]
fn the_control_tool_mounts_at_200_as_todo_write() {
    let s = session();
    let control = &s.spec.control_tools;
    assert_eq!(control.len(), 1);
    assert_eq!(
        (control[0].name.as_str(), control[0].priority),
        ("TodoWrite", 200)
    );
}

#[test]
fn a_list_is_recorded_folded_and_summarised() {
    let (rt, s, t) = run(json!([
        item("Write notes", "completed"),
        item("Tag release", "in_progress"),
        item("Announce", "pending")
    ]));
    let (text, is_error) = result(&rt, &s, &t);
    assert!(!is_error);
    assert_eq!(
        text,
        "Todo list updated: 3 item(s) — 1 completed, 1 in progress, 1 pending. Keep it current as you work."
    );
    let state = block_on(rt.load(&s, &t)).unwrap();
    let list = todos::read(&state);
    assert_eq!(list.todos.len(), 3);
    assert_eq!(list.todos[1].status, TodoStatus::InProgress);
    assert_eq!(list.unfinished().count(), 2);
    let shown = block_on(rt.run_command(&s, &t, "todos", "")).unwrap();
    assert_eq!(
        shown.text(),
        "[x] Write notes\n[~] Tag release\n[ ] Announce"
    );
}

#[test]
fn a_later_list_replaces_the_earlier_one() {
    let turns = json!({ "turns": [
        { "calls": [{ "name": "TodoWrite", "input": { "todos": [item("A", "pending"), item("B", "pending")] } }] },
        { "calls": [{ "name": "TodoWrite", "input": { "todos": [item("A", "completed")] } }] },
        { "text": "done" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    let log = Arc::new(MemoryEventLog::new(ManualClock::at(0)));
    let rt = Runtime::new(log, Arc::new(MemoryContentStore::new()), Arc::new(provider));
    let s = session();
    let t = TaskId::new("replace").unwrap();
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let list = todos::read(&block_on(rt.load(&s, &t)).unwrap());
    assert_eq!(list.todos.len(), 1);
    assert_eq!(list.todos[0].status, TodoStatus::Completed);
}

#[test]
fn an_empty_list_clears_the_plan() {
    let (rt, s, t) = run(json!([]));
    assert_eq!(
        result(&rt, &s, &t).0,
        "Todo list updated: 0 item(s) — 0 completed, 0 in progress, 0 pending. Keep it current as you work."
    );
    assert_eq!(
        block_on(rt.run_command(&s, &t, "todos", ""))
            .unwrap()
            .text(),
        "No todo list yet."
    );
}

#[test]
fn every_limit_is_an_error_the_model_can_act_on() {
    let too_many: Vec<Value> = (0..51)
        .map(|i| item(&format!("step {i}"), "pending"))
        .collect();
    let long = "x".repeat(501);
    let cases = [
        (json!(too_many), "/todos: "),
        (
            json!([{ "content": "A", "status": "started", "activeForm": "Aing" }]),
            "/todos/0/status: ",
        ),
        (
            json!([{ "content": long, "status": "pending", "activeForm": "Aing" }]),
            "/todos/0/content: ",
        ),
        (
            json!([{ "content": "A", "status": "pending" }]),
            "/todos/0: ",
        ),
        (
            json!([{ "content": "", "status": "pending", "activeForm": "Aing" }]),
            "/todos/0/content: ",
        ),
        (
            json!([{ "content": "A", "status": "pending", "activeForm": "Aing", "extra": 1 }]),
            "/todos/0: ",
        ),
    ];
    for (todos, at) in cases {
        let (rt, s, t) = run(todos);
        let (text, is_error) = result(&rt, &s, &t);
        assert!(is_error, "{text}");
        assert!(
            text.starts_with(&format!("TodoWrite: invalid input — {at}")),
            "{text}"
        );
        assert!(
            todos::read(&block_on(rt.load(&s, &t)).unwrap())
                .todos
                .is_empty(),
            "nothing recorded"
        );
    }
    let (rt, s, t) = run(json!([{ "content": "  ", "status": "pending", "activeForm": "Aing" }]));
    assert_eq!(
        result(&rt, &s, &t).0,
        "TodoWrite: item 1 has blank text; give every item a content and an activeForm"
    );
}

#[test]
fn a_fork_keeps_the_list_counted_from_its_own_first_reply() {
    let (rt, s, t) = run(json!([item("A", "pending")]));
    let fork = TaskId::new("fork").unwrap();
    block_on(rt.fork(&s, &t, &fork)).unwrap();
    let list = todos::read(&block_on(rt.load(&s, &fork)).unwrap());
    assert_eq!(list.todos.len(), 1);
    assert_eq!(list.written_at, 0);
    assert_eq!(
        todos::read(&block_on(rt.load(&s, &t)).unwrap()).written_at,
        1
    );
}
