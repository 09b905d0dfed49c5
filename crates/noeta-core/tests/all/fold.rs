//! The kernel's fold of its own records: the typed form a record was made from and the JSON a
//! store gives back fold alike, and a malformed `core` record is an error naming kind and seq.

use std::collections::BTreeMap;

use noeta_core::fold::{FoldError, Folder, TaskState, TurnState};
use noeta_core::model::{Message, Role};
use noeta_core::model::{StopReason, ToolCall, Usage};
use noeta_core::records::{CallOutcome, CoreRecord, PluginPin};
use noeta_core::records::{ChildResult, SpawnOrder};
use noeta_core::store::{ContentRef, Event, Record};
use serde_json::json;

fn order(child: &str, background: bool) -> SpawnOrder {
    SpawnOrder {
        child: child.into(),
        agent: "explore".into(),
        goal: format!("look at {child}"),
        inherited: BTreeMap::from([("todo".into(), json!({"items": [1, 2]}))]),
        background,
    }
}

fn result(task: &str) -> ChildResult {
    ChildResult {
        task: task.into(),
        agent: "explore".into(),
        ok: true,
        text: format!("{task} found it"),
    }
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input: json!({"path": "src/lib.rs", "limit": 20, "ratio": 0.5, "deep": {"x": [null, true]}}),
    }
}

/// Every kind of `core` record, in an order a task could write them (messages on some).
fn every_kind() -> Vec<Record> {
    let attachment = ContentRef {
        sha256: "ab".repeat(32),
        len: 3,
        media_type: "image/png".into(),
    };
    let finished = |id: &str, outcome| {
        CoreRecord::CallFinished {
            call_id: id.into(),
            tool: "Read".into(),
            text: format!("{id} done").into(),
            outcome,
            full: None,
            attachments: vec![attachment.clone()],
        }
        .to_record()
    };
    vec![
        CoreRecord::TaskStarted {
            agent: "main".into(),
            parent: Some("root".into()),
            depth: 1,
            inherited: BTreeMap::from([("plan".into(), json!({"on": true}))]),
            host: None,
        }
        .to_record(),
        CoreRecord::PluginsPinned {
            identity: "id-1".into(),
            pins: vec![PluginPin {
                name: "fs".into(),
                source: "builtin".into(),
                version: "0.1.0".into(),
                params: "00".into(),
            }],
        }
        .to_record(),
        CoreRecord::UserMessage {
            text: "first".into(),
        }
        .to_record(),
        CoreRecord::IntakeDone { seq: 3 }.to_record(),
        CoreRecord::RequestComposed {
            stable: "s".into(),
            residents: "r".into(),
            dynamic: "d".into(),
        }
        .to_record(),
        CoreRecord::AssistantReply {
            text: "looking".into(),
            calls: vec![call("c1", "Read"), call("c2", "Ask"), call("c3", "Task")].into(),
            stop: StopReason::ToolUse,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cache_read_tokens: 2,
                cache_write_tokens: 1,
                cost_micros: Some(7),
            },
            reasoning: vec![json!({"type": "thinking", "thinking": "hm", "signature": "sig"})],
        }
        .to_record(),
        CoreRecord::CallStarted {
            call_id: "c1".into(),
            tool: "Read".into(),
            input: json!({"path": "src/lib.rs"}).into(),
        }
        .to_record(),
        finished("c1", CallOutcome::Ok),
        CoreRecord::CallParked {
            call_id: "c2".into(),
            question: "may I?".into(),
        }
        .to_record(),
        CoreRecord::AskAnswered {
            call_id: "c2".into(),
            allow: true,
        }
        .to_record(),
        CoreRecord::CallStarted {
            call_id: "c2".into(),
            tool: "Ask".into(),
            input: json!({}).into(),
        }
        .to_record(),
        CoreRecord::ToolParked {
            call_id: "c2".into(),
            question: Some("which one?".into()),
            children: vec![],
        }
        .to_record(),
        CoreRecord::CallAnswered {
            call_id: "c2".into(),
            answer: json!({"choice": 2}),
        }
        .to_record(),
        CoreRecord::ResumeStarted {
            call_id: "c2".into(),
        }
        .to_record(),
        finished("c2", CallOutcome::Error),
        CoreRecord::CallStarted {
            call_id: "c3".into(),
            tool: "Task".into(),
            input: json!({"agent": "explore"}).into(),
        }
        .to_record(),
        CoreRecord::ToolParked {
            call_id: "c3".into(),
            question: None,
            children: vec![order("k1", false), order("k2", false)],
        }
        .to_record(),
        CoreRecord::ChildrenFinished {
            call_id: "c3".into(),
            results: vec![result("k1"), result("k2")],
        }
        .to_record(),
        CoreRecord::BackgroundStarted {
            call_id: "c3".into(),
            children: vec![order("b1", true)],
        }
        .to_record(),
        finished("c3", CallOutcome::Denied),
        CoreRecord::Note {
            reason: "nudge".into(),
        }
        .with_message("keep going"),
        CoreRecord::TurnEnded {
            reason: "end_turn".into(),
        }
        .to_record(),
        CoreRecord::BackgroundDelivered {
            result: result("b1"),
        }
        .with_message("b1 reported"),
        CoreRecord::FoldFailed {
            reason: "a reduce failed".into(),
        }
        .to_record(),
        CoreRecord::ClaimRefused {
            plugin: "web".into(),
        }
        .to_record(),
        CoreRecord::TurnFailed {
            reason: "internal_error".into(),
        }
        .to_record(),
        CoreRecord::UserMessage {
            text: "second".into(),
        }
        .to_record(),
        CoreRecord::Erased { seq: 27 }.to_record(),
        CoreRecord::Continued {
            from: "other".into(),
            messages: vec![
                Message::synthetic(1, Role::User, "earlier"),
                Message::synthetic(2, Role::Assistant, "reply"),
            ],
            states: BTreeMap::from([("todo".into(), json!({"items": []}))]),
        }
        .to_record(),
        CoreRecord::TaskFailed {
            reason: "budget".into(),
        }
        .to_record(),
    ]
}

fn events(records: Vec<Record>) -> Vec<Event> {
    records
        .into_iter()
        .enumerate()
        .map(|(i, record)| Event::new(i as u64 + 1, record))
        .collect()
}

/// The records as a store that keeps JSON gives them back: without the typed form.
fn through_json(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .map(|r| serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap())
        .collect()
}

fn fold(events: &[Event]) -> TaskState {
    Folder::new(&[], "fold-test").fold(events).unwrap()
}

#[test]
fn every_core_kind_folds_alike_from_its_typed_form_and_from_stored_json() {
    let records = every_kind();
    let stored = through_json(&records);
    assert_eq!(
        stored, records,
        "equality is the payload's, not the typed form's"
    );

    let typed = fold(&events(records));
    let decoded = fold(&events(stored));
    assert_eq!(typed.canonical_bytes(), decoded.canonical_bytes());
    assert_eq!(typed, decoded);

    // The fold did read the records (not an empty state twice).
    let core = &typed.core;
    assert_eq!(core.agent.as_deref(), Some("main"));
    assert_eq!(core.model_calls, 1);
    assert_eq!(core.tool_calls, 3);
    assert_eq!(core.usage.cost_micros, Some(7));
    assert!(core.open_calls.is_empty());
    assert!(core.background.is_empty());
    assert_eq!(core.task_failed.as_deref(), Some("budget"));
    assert_eq!(typed.ext_state("todo"), Some(&json!({"items": []})));
    let texts: Vec<&str> = core.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        ["earlier", "reply"],
        "the continued conversation replaces it"
    );
}

#[test]
fn each_prefix_folds_alike_from_typed_and_stored_records() {
    // Every intermediate state too: parks, answers, open calls and the turn as they stand.
    let records = every_kind();
    let stored = through_json(&records);
    let (typed, decoded) = (events(records), events(stored));
    for end in 1..=typed.len() {
        assert_eq!(
            fold(&typed[..end]).canonical_bytes(),
            fold(&decoded[..end]).canonical_bytes(),
            "after {} events",
            end
        );
    }
    let parked = fold(&typed[..9]);
    assert_eq!(
        parked.core.turn,
        TurnState::Parked {
            call_id: "c2".into(),
            question: "may I?".into()
        }
    );
    let open = fold(&typed[..7]);
    assert_eq!(
        *open.core.open_calls["c1"].input,
        json!({"path": "src/lib.rs"})
    );
}

#[test]
fn a_record_shows_and_compares_by_what_is_stored() {
    let typed = CoreRecord::TurnEnded {
        reason: "done".into(),
    }
    .to_record();
    let plain = Record::new("core", "turn_ended", json!({"reason": "done"}));
    assert_eq!(typed, plain);
    assert_eq!(format!("{typed:?}"), format!("{plain:?}"));
}

#[test]
fn a_malformed_core_record_fails_the_fold_naming_its_kind_and_seq() {
    let mut records = through_json(&every_kind()[..3]);
    records.push(Record::new(
        "core",
        "call_finished",
        json!({"call_id": 7, "tool": "Read"}),
    ));
    let err = Folder::new(&[], "fold-test")
        .fold(&events(records))
        .unwrap_err();
    let FoldError::Core { kind, seq, reason } = &err else {
        panic!("expected a core record error, got {err:?}");
    };
    assert_eq!((kind.as_str(), *seq), ("call_finished", 4));
    assert!(reason.contains("invalid type"), "{reason}");
    assert!(
        err.to_string()
            .starts_with("core record `call_finished` at seq 4 is malformed"),
        "{err}"
    );
}

#[test]
fn kinds_the_fold_does_not_read_are_not_decoded() {
    // A stored `note` or `request_composed` with an odd payload is skipped, as it always was.
    let records = vec![
        Record::new("core", "note", json!("free text")),
        Record::new("core", "request_composed", json!([1, 2])),
    ];
    let state = fold(&events(records));
    assert_eq!(state.seq, 2);
}

#[test]
fn a_folded_message_shares_its_text_and_calls_with_the_record() {
    let reply = CoreRecord::AssistantReply {
        text: "looking".into(),
        calls: vec![call("c1", "Read")].into(),
        stop: StopReason::ToolUse,
        usage: Usage::default(),
        reasoning: Vec::new(),
    };
    let events = events(vec![
        CoreRecord::UserMessage { text: "go".into() }.to_record(),
        reply.clone().to_record(),
    ]);
    let state = fold(&events);
    let folded = &state.core.messages[1];
    let CoreRecord::AssistantReply { text, calls, .. } = &reply else {
        unreachable!()
    };
    // The same bytes in memory, not a copy of them.
    assert_eq!(folded.text.as_ptr(), text.as_ptr());
    assert_eq!(folded.calls.as_ptr(), calls.as_ptr());
    // Cloning the state copies no text either.
    let copy = state.clone();
    assert_eq!(copy.core.messages[1].text.as_ptr(), text.as_ptr());

    // A tool result shares its text and call id; the open call its tool and input.
    let started = CoreRecord::CallStarted {
        call_id: "c1".into(),
        tool: "Read".into(),
        input: json!({"path": "a"}).into(),
    };
    let finished = CoreRecord::CallFinished {
        call_id: "c1".into(),
        tool: "Read".into(),
        text: "contents".into(),
        outcome: CallOutcome::Ok,
        full: None,
        attachments: Vec::new(),
    };
    let folder = Folder::new(&[], "fold-test");
    let mut state = state;
    folder
        .apply(&mut state, &Event::new(3, started.clone().to_record()))
        .unwrap();
    let CoreRecord::CallStarted { tool, input, .. } = &started else {
        unreachable!()
    };
    let open = &state.core.open_calls["c1"];
    assert_eq!(open.tool.as_ptr(), tool.as_ptr());
    assert!(std::sync::Arc::ptr_eq(&open.input, input));
    folder
        .apply(&mut state, &Event::new(4, finished.clone().to_record()))
        .unwrap();
    let CoreRecord::CallFinished { call_id, text, .. } = &finished else {
        unreachable!()
    };
    let result = &state.core.messages[2];
    assert_eq!(result.text.as_ptr(), text.as_ptr());
    assert_eq!(result.call_id.as_ref().unwrap().as_ptr(), call_id.as_ptr());
    assert!(state.core.open_calls.is_empty());
}

#[test]
fn shared_text_reads_compares_and_serialises_as_a_string() {
    let message = Message::synthetic(3, Role::User, "tab\there \"quoted\" é");
    assert_eq!(message.text, "tab\there \"quoted\" é");
    assert_eq!(message.text.to_string(), "tab\there \"quoted\" é");
    assert!(message.text.starts_with("tab"));
    let json = serde_json::to_value(&message).unwrap();
    assert_eq!(json["text"], "tab\there \"quoted\" é");
    assert!(json.get("calls").is_none(), "no calls, no field");
    // Read back from text with escapes, from text without, and from a JSON value.
    let back: Message = serde_json::from_str(&json.to_string()).unwrap();
    assert_eq!(back, message);
    let back: Message = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, message);
    let mut plain = json.clone();
    plain["text"] = json!("plain");
    let plain: Message = serde_json::from_str(&plain.to_string()).unwrap();
    assert_eq!(plain.text, "plain");
    let wrong = serde_json::from_value::<Message>(json!({
        "seq": 1, "role": "user", "text": 5, "hash": json["hash"].clone()
    }))
    .unwrap_err()
    .to_string();
    assert!(wrong.contains("a string"), "{wrong}");
}
