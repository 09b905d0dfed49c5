//! `AskUserQuestion` through the real runtime: the turn parks on the questions and resumes once with the answer.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;

use futures::executor::block_on;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::Session;
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_testkit::harness::session_of;
use serde_json::{Value, json};

fn session() -> Session {
    session_of(
        vec![noeta_builtin_ask_user_question::plugin()],
        &["ask_user_question"],
        &Default::default(),
    )
}

fn start(questions: Value) -> (Runtime, Session, TaskId, RunOutcome) {
    let turns = json!({ "turns": [
        { "calls": [{ "id": "q1", "name": "AskUserQuestion", "input": { "questions": questions } }] },
        { "text": "thanks" }
    ]});
    let provider = ScriptedProvider::from_json(&turns.to_string(), "test").unwrap();
    let log = Arc::new(MemoryEventLog::new(ManualClock::at(0)));
    let rt = Runtime::new(log, Arc::new(MemoryContentStore::new()), Arc::new(provider));
    let s = session();
    let t = TaskId::new("ask").unwrap();
    block_on(rt.create(&s, &t, "set it up")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    (rt, s, t, outcome)
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

fn question(text: &str, header: &str, multi: bool) -> Value {
    json!({
        "question": text,
        "header": header,
        "multiSelect": multi,
        "options": [
            { "label": "Postgres", "description": "Shared database for many hosts" },
            { "label": "SQLite", "description": "One file on one host" },
            { "label": "Memory", "description": "Nothing persists" }
        ]
    })
}

#[test]
fn the_control_tool_mounts_at_300_as_ask_user_question() {
    let s = session();
    let control = &s.spec.control_tools;
    assert_eq!(
        (control[0].name.as_str(), control[0].priority),
        ("AskUserQuestion", 300)
    );
}

#[test]
fn the_turn_parks_on_the_questions_and_resumes_once_with_the_answers() {
    let (rt, s, t, outcome) = start(json!([
        question("Which store should the service use?", "Store", false),
        question("Which backends must the tests cover?", "Tests", true)
    ]));
    assert_eq!(
        outcome,
        RunOutcome::Parked {
            call_id: "q1".into(),
            question: "Store: Which store should the service use?\nTests: Which backends must the tests cover?".into()
        }
    );
    let answer = json!({ "answers": {
        "Which store should the service use?": "Postgres",
        "Which backends must the tests cover?": ["SQLite", "Postgres"]
    }});
    block_on(rt.reply(&s, &t, "q1", answer)).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    let (text, is_error) = result(&rt, &s, &t);
    assert!(!is_error);
    assert_eq!(
        text,
        "The user answered:\n- Store (Which store should the service use?): Postgres\n- Tests (Which backends must the tests cover?): SQLite, Postgres\nContinue with these answers in mind."
    );
    // A second reply finds nothing waiting.
    assert!(block_on(rt.reply(&s, &t, "q1", json!({"answers": {}}))).is_err());
}

#[test]
fn the_user_may_answer_in_their_own_words_or_not_at_all() {
    let (rt, s, t, _) = start(json!([
        question("Which store?", "Store", false),
        question("Which tests?", "Tests", true)
    ]));
    block_on(rt.reply(
        &s,
        &t,
        "q1",
        json!({ "answers": { "Which store?": "whatever the team already runs" } }),
    ))
    .unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let (text, _) = result(&rt, &s, &t);
    assert!(
        text.contains("- Store (Which store?): whatever the team already runs"),
        "{text}"
    );
    assert!(
        text.contains("- Tests (Which tests?): (no answer)"),
        "{text}"
    );
}

#[test]
fn a_malformed_answer_is_refused_before_it_is_recorded_and_the_question_stays_open() {
    let long = "y".repeat(4001);
    let cases = [
        (
            json!({ "nope": 1 }),
            "the reply has no `answers` object keyed by question (expected {\"answers\": {\"<question>\": \"<answer>\"}}, got `{\"nope\":1}`)",
        ),
        (
            json!({ "answers": { "Other?": "x" } }),
            "the reply answers a question that was not asked: `Other?` (asked: Which store?)",
        ),
        (
            json!({ "answers": { "Which store?": ["a", "b"] } }),
            "`Store` allows one choice, but several were given",
        ),
        (
            json!({ "answers": { "Which store?": 3 } }),
            "the answer to `Store` must be text",
        ),
        (
            json!({ "answers": { "Which store?": " " } }),
            "the answer to `Store` is empty",
        ),
        (
            json!({ "answers": { "Which store?": long } }),
            "the answer to `Store` has 4001 characters; at most 4000 are allowed",
        ),
    ];
    for (answer, expected) in cases {
        let (rt, s, t, _) = start(json!([question("Which store?", "Store", false)]));
        let head = block_on(rt.log().info(&t)).unwrap().head;
        let err = block_on(rt.reply(&s, &t, "q1", answer)).unwrap_err();
        match &err {
            noeta_core::runner::RunError::BadAnswer {
                call_id, reason, ..
            } => {
                assert_eq!(call_id, "q1");
                assert_eq!(reason, expected);
            }
            other => panic!("expected a refused answer, got {other:?}"),
        }
        assert!(
            err.to_string().starts_with(
                "the answer to call `q1` of task `ask` was refused, and the question stays open: "
            ),
            "{err}"
        );
        assert_eq!(
            block_on(rt.log().info(&t)).unwrap().head,
            head,
            "nothing was written"
        );
        // The question is still open: a good answer is taken and the turn goes on.
        block_on(rt.reply(
            &s,
            &t,
            "q1",
            json!({ "answers": { "Which store?": "SQLite" } }),
        ))
        .unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        let (text, is_error) = result(&rt, &s, &t);
        assert!(!is_error, "{text}");
        assert!(text.contains("- Store (Which store?): SQLite"), "{text}");
    }
}

#[test]
fn every_limit_on_the_questions_is_an_error_the_model_can_act_on() {
    let base = question("Which store?", "Store", false);
    let with = |key: &str, value: Value| {
        let mut q = base.clone();
        q[key] = value;
        json!([q])
    };
    let two_options = json!([{ "label": "A", "description": "a" }]);
    let cases = [
        (json!([]), "/questions: "),
        (
            json!([
                base.clone(),
                base.clone(),
                base.clone(),
                base.clone(),
                base.clone()
            ]),
            "/questions: ",
        ),
        (
            with("header", json!("ThirteenChars")),
            "/questions/0/header: ",
        ),
        (
            with("question", json!("q".repeat(501))),
            "/questions/0/question: ",
        ),
        (with("options", two_options), "/questions/0/options: "),
        (
            with(
                "options",
                json!([{ "label": "L".repeat(81), "description": "" }, { "label": "B", "description": "" }]),
            ),
            "/questions/0/options/0/label: ",
        ),
        (
            with(
                "options",
                json!([{ "label": "A", "description": "d".repeat(301) }, { "label": "B", "description": "" }]),
            ),
            "/questions/0/options/0/description: ",
        ),
    ];
    for (questions, at) in cases {
        let (rt, s, t, outcome) = start(questions);
        assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
        let (text, is_error) = result(&rt, &s, &t);
        assert!(is_error);
        assert!(
            text.starts_with(&format!("AskUserQuestion: invalid input — {at}")),
            "{text}"
        );
    }
    let (rt, s, t, _) = start(json!([base.clone(), base.clone()]));
    assert_eq!(
        result(&rt, &s, &t).0,
        "AskUserQuestion: question 2 repeats an earlier question"
    );
    let (rt, s, t, _) = start(with(
        "options",
        json!([{ "label": "A", "description": "" }, { "label": "A", "description": "" }]),
    ));
    assert_eq!(
        result(&rt, &s, &t).0,
        "AskUserQuestion: question 1 offers the option `A` twice"
    );
}
