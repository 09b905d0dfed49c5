//! A claim of a task (`runner/claim.rs`): folding its log, what each appended batch holds,
//! observers, plugin pins and refused claims, snapshots, erasure and folds that fail.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::Folder;
use noeta_core::model::ToolCall;
use noeta_core::records::CoreRecord;
use noeta_core::runner::{RunError, RunOutcome, Runtime};
use noeta_core::session::{Session, SessionError, bare_session, build_session};
use noeta_core::store::{Event, EventLog, MemoryEventLog, Record};
use noeta_core::{PluginSource, Resolved, Verdict};
use noeta_testkit::harness::{CrashAfter, Harness, Tapped};
use serde_json::{Value, json};

use super::support::{TestTool, built, call, offers, retry_safe_look, says, session, task, texts};
use crate::support::{Fixtures, Manifest, ResolveWith, agent, compile};

#[test]
fn a_task_loaded_after_its_run_is_the_task_folded_from_its_log() {
    let h = Harness::new();
    let script = json!([
        { "calls": [call("probe", json!({ "n": 1 }))] },
        { "text": "Done." },
        { "text": "Again." }
    ]);
    let s = session(vec![offers(vec![Arc::new(TestTool::new("probe"))])]);
    let t = task("loaded-after-run");
    let rt = h.runtime(script.clone());
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let bytes = |rt: &Runtime| {
        let state = block_on(rt.load(&s, &t)).unwrap();
        noeta_core::canonical::to_bytes(&serde_json::to_value(&state).unwrap())
    };
    // The runtime that ran it, and one that never did (it folds the log).
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    // What another runtime records later is seen by the one that ran it first.
    let other = h.runtime(script);
    block_on(other.send(&s, &t, "once more")).unwrap();
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    block_on(other.run(&s, &t)).unwrap();
    assert_eq!(bytes(&rt), bytes(&h.runtime(json!([]))));
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(texts[texts.len() - 2..], ["once more", "Again."]);
    // A session of another plugin set folds the log itself.
    let mut bare = session(Vec::new());
    bare.folder = Folder::new(&bare.extensions, "another-set");
    let folded = block_on(rt.load(&bare, &t)).unwrap();
    assert_eq!(folded.seq, state.seq);
}

/// Runs one task of `s` over `turns` and gives back the kinds of each batch it appended.
fn batches_of_a_run(s: &Session, turns: Value) -> Vec<Vec<String>> {
    let h = Harness::new();
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let kinds = seen.clone();
    let log = Tapped::over(h.log.clone()).on_append(move |_, batch| {
        kinds
            .lock()
            .unwrap()
            .push(batch.iter().map(|r| r.kind.clone()).collect());
        Ok(())
    });
    let rt = h.runtime_over(Arc::new(log), turns);
    let t = task("batches");
    block_on(rt.create(s, &t, "go")).unwrap();
    block_on(rt.run(s, &t)).unwrap();
    seen.lock().unwrap().clone()
}

#[test]
fn a_reply_is_written_with_the_started_records_of_its_calls() {
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![offers(vec![work.clone()])]);
    let batches = batches_of_a_run(
        &s,
        json!([{ "calls": [call("Work", json!({}))] }, { "text": "done" }]),
    );
    let expected: Vec<Vec<&str>> = vec![
        vec!["task_started", "plugins_pinned", "user_message"],
        vec!["intake_done"],
        vec!["request_composed", "assistant_reply", "call_started"],
        // The tool's own record, with its result.
        vec!["ran", "call_finished"],
        // A reply without calls is written on its own, before the turn is decided.
        vec!["request_composed", "assistant_reply"],
        vec!["turn_ended"],
    ];
    assert_eq!(batches, expected, "{batches:?}");
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_retry_safe_result_is_written_with_the_next_reply_one_write_per_step() {
    let (look, s) = retry_safe_look();
    let batches = batches_of_a_run(
        &s,
        json!([
            { "calls": [call("Look", json!({"n": 1}))] },
            { "calls": [call("Look", json!({"n": 2}))] },
            { "text": "done" }
        ]),
    );
    let expected: Vec<Vec<&str>> = vec![
        vec!["task_started", "plugins_pinned", "user_message"],
        vec!["intake_done"],
        vec!["request_composed", "assistant_reply", "call_started"],
        // The tool's own record and its result go with the next reply.
        vec![
            "ran",
            "call_finished",
            "request_composed",
            "assistant_reply",
            "call_started",
        ],
        vec![
            "ran",
            "call_finished",
            "request_composed",
            "assistant_reply",
        ],
        vec!["turn_ended"],
    ];
    assert_eq!(batches, expected, "{batches:?}");
    assert_eq!(look.runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_crash_before_a_reply_is_written_runs_no_tool_and_asks_the_model_again() {
    let h = Harness::new();
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![offers(vec![work.clone()])]);
    let t = task("unwritten");
    let turns = json!([{ "calls": [call("Work", json!({}))] }, { "text": "done" }]);
    // Appends: create, intake — then the worker dies writing the reply and its started-record.
    let dying = h.runtime_over(Arc::new(CrashAfter::new(h.log.clone(), 2)), turns.clone());
    block_on(dying.create(&s, &t, "go")).unwrap();
    assert!(block_on(dying.run(&s, &t)).is_err());
    assert_eq!(work.runs.load(Ordering::SeqCst), 0, "no tool ran");
    assert!(!h.core_kinds(&t).contains(&"assistant_reply".to_owned()));
    h.clock.advance(5_000);
    let rt = h.runtime(turns);
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
    let kinds = h.core_kinds(&t);
    let replies = kinds.iter().filter(|k| *k == "assistant_reply").count();
    assert_eq!(replies, 2, "{kinds:?}");
    let seqs: Vec<u64> = h.events(&t).iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_reply_is_written_before_a_person_is_asked() {
    struct Person(Arc<MemoryEventLog>, Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Extension for Person {
        fn name(&self) -> &str {
            "person"
        }
        async fn resolve_ask(
            &self,
            v: &View<'_>,
            _c: &ToolCall,
            _asks: &[String],
        ) -> HookResult<Option<noeta_core::extension::AskAnswer>> {
            let events = self.0.read(v.task_id(), 0).await.unwrap();
            *self.1.lock().unwrap() = events.iter().map(|e| e.record.kind.clone()).collect();
            Ok(Some(noeta_core::extension::AskAnswer::Allow))
        }
    }
    let h = Harness::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let work = Arc::new(TestTool::new("Work"));
    let s = session(vec![
        offers(vec![work.clone()]),
        says(
            "asker",
            Some(Verdict::Ask {
                reason: "run Work?".into(),
                firm: false,
            }),
        ),
        Arc::new(Person(h.log.clone(), seen.clone())),
    ]);
    let t = task("asked");
    let rt = h.runtime(json!([{ "calls": [call("Work", json!({}))] }, { "text": "ok" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.last().map(String::as_str),
        Some("assistant_reply"),
        "{seen:?}"
    );
    assert_eq!(work.runs.load(Ordering::SeqCst), 1);
}

/// Sees every event, fails on every other one, and panics at the turn's end.
struct Flaky(Arc<Mutex<Vec<String>>>);

impl noeta_core::Observer for Flaky {
    fn observe(&self, event: &noeta_core::ObservedEvent) -> Result<(), String> {
        let count = {
            let mut seen = self.0.lock().unwrap();
            seen.push(event.kind.clone());
            seen.len()
        };
        if event.kind == "turn_ended" {
            panic!("an observer that panics");
        }
        if count % 2 == 0 {
            return Err("the metrics sink is down".into());
        }
        Ok(())
    }
}

#[test]
fn an_observer_contribution_sees_every_event_and_its_failures_leave_the_task_alone() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let observer = Arc::new(Flaky(seen.clone()));
    let s = built(
        vec![
            PluginSource::Linked(
                Manifest::new("tools")
                    .with("tool", "Echo", "")
                    .linked("noeta-tools", Fixtures),
            ),
            PluginSource::Linked(
                Manifest::new("metrics")
                    .with("observer", "flaky", "")
                    .linked(
                        "noeta-metrics",
                        ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                            Ok(Resolved::Observer(observer.clone()))
                        }),
                    ),
            ),
        ],
        &["tools"],
    );
    let h = Harness::new();
    let rt =
        h.runtime(json!([{ "calls": [call("Echo", json!({"text": "x"}))] }, { "text": "ok" }]));
    let t = task("observed");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let kinds: Vec<String> = h.events(&t).iter().map(|e| e.record.kind.clone()).collect();
    assert_eq!(*seen.lock().unwrap(), kinds, "every event, in order");
    assert!(kinds.iter().any(|k| k == "call_finished"));
    assert_eq!(kinds.last().map(String::as_str), Some("turn_ended"));
}

#[test]
fn a_task_pinned_with_a_plugin_this_host_lacks_is_refused_naming_it() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut with_plugin = bare_session("main", "");
    with_plugin.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("pins");
    block_on(rt.create(&with_plugin, &t, "go")).unwrap();
    let without = bare_session("main", "");
    let err = block_on(rt.run(&without, &t)).unwrap_err();
    assert!(matches!(err, RunError::PluginMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("plugin `house` (file 1.0.0)"),
        "{err}"
    );
}

#[test]
fn changed_pins_are_re_recorded() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }, { "text": "ok" }]));
    let mut s = bare_session("main", "");
    let t = task("repin");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    s.spec.instructions = "Now with instructions.".into();
    block_on(rt.send(&s, &t, "again")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let pinned = h
        .core_kinds(&t)
        .iter()
        .filter(|k| *k == "plugins_pinned")
        .count();
    assert_eq!(pinned, 2);
}

#[test]
fn a_default_policy_that_is_not_the_pinned_one_is_refused() {
    struct Other;
    impl noeta_core::policy::Policy for Other {
        fn policy_ref(&self) -> noeta_core::ComponentRef {
            noeta_core::ComponentRef::new("other", "2")
        }
        fn decide(
            &self,
            _v: &View<'_>,
            _r: &noeta_core::model::ModelReply,
        ) -> noeta_core::policy::Decision {
            noeta_core::policy::Decision::RunTools
        }
    }
    let set = crate::support::load(&[PluginSource::Linked(
        Manifest::new("p").linked("noeta-p", Fixtures),
    )]);
    let compiled = compile(&set, &agent("main", &["p"])).unwrap();
    let err =
        build_session(&set, &compiled, &Default::default(), Some(Arc::new(Other))).unwrap_err();
    assert!(matches!(err, SessionError::PolicyMismatch { .. }));
    assert_eq!(
        err.to_string(),
        "agent `main` pins policy core@1, but the policy available to run it is other@2"
    );
}

#[test]
fn a_pool_worker_missing_a_pinned_plugin_lets_the_task_go_and_three_refusals_fail_it() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let mut pinned = bare_session("main", "");
    pinned.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let t = task("pool");
    block_on(rt.create(&pinned, &t, "go")).unwrap();
    let worker = h.runtime(json!([{ "text": "ok" }])).as_pool_worker();
    let lacking = bare_session("main", "");
    for round in 1..=3 {
        let err = block_on(worker.run(&lacking, &t)).unwrap_err();
        assert!(
            matches!(err, RunError::PluginMissing { .. }),
            "round {round}: {err}"
        );
        h.clock.advance(2_000); // the lease lapses
    }
    let state = block_on(rt.load(&pinned, &t)).unwrap();
    assert!(
        state.core.task_failed.as_deref().is_some_and(
            |r| r.starts_with("plugin_missing: no worker that claimed it has plugin `house`")
        ),
        "{state:?}"
    );
    assert_eq!(
        h.core_kinds(&t)
            .iter()
            .filter(|k| *k == "claim_refused")
            .count(),
        3
    );
}

/// Counts its own records; clears nothing on erasure but remembers it.
struct Counter;

#[async_trait]
impl Extension for Counter {
    fn name(&self) -> &str {
        "counter"
    }
    async fn turn_intake(&self, v: &View<'_>, _m: &str) -> HookResult<()> {
        v.record("counter", "tick", json!({}));
        Ok(())
    }
    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let ticks = state.get("ticks").and_then(Value::as_u64).unwrap_or(0);
        let mut erased: Vec<Value> = state
            .get("erased")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match kind {
            "tick" => *state = json!({"ticks": ticks + 1, "erased": erased}),
            "erased" => {
                erased.push(data["seq"].clone());
                *state = json!({"ticks": ticks, "erased": erased});
            }
            other => return Err(format!("unknown kind {other}")),
        }
        Ok(())
    }
}

#[test]
fn a_run_writes_a_snapshot_only_once_enough_events_came_after_the_last() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }, { "text": "b" }]));
    let s = session(vec![]);
    let t = task("few");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(
        block_on(h.log.snapshot(&t)).unwrap(),
        None,
        "a short run writes none"
    );
    let rt = h
        .runtime(json!([{ "text": "a" }, { "text": "b" }]))
        .with_snapshot_every(3);
    block_on(rt.send(&s, &t, "two")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let snapshot = block_on(h.log.snapshot(&t)).unwrap().unwrap();
    assert_eq!(snapshot.seq, h.events(&t).len() as u64);
}

#[test]
fn a_snapshot_plus_tail_folds_to_the_same_bytes_and_another_plugin_set_ignores_it() {
    let h = Harness::new();
    let rt = h
        .runtime(json!([{ "text": "a" }, { "text": "b" }]))
        .with_snapshot_every(1);
    let s = session(vec![Arc::new(Counter)]);
    let t = task("snap");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap(); // writes a snapshot
    block_on(rt.send(&s, &t, "two")).unwrap();
    let events = h.events(&t);
    let scratch = s.folder.fold(&events).unwrap();
    let snapshot = block_on(h.log.snapshot(&t)).unwrap().unwrap();
    assert!(snapshot.seq < events.len() as u64);
    let tail: Vec<Event> = events
        .iter()
        .filter(|e| e.seq > snapshot.seq)
        .cloned()
        .collect();
    let resumed = s.folder.fold_from(Some(&snapshot), &tail).unwrap();
    assert_eq!(resumed.canonical_bytes(), scratch.canonical_bytes());
    assert_eq!(
        scratch.ext_state("counter"),
        Some(&json!({"ticks": 1, "erased": []}))
    );

    let other = Folder::new(&s.extensions, "another-set");
    let refolded = other.fold_from(Some(&snapshot), &events).unwrap();
    assert_eq!(refolded.canonical_bytes(), scratch.canonical_bytes());
}

#[test]
fn an_unreadable_snapshot_is_ignored_and_the_log_folded_from_scratch() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }, { "text": "b" }]));
    let s = bare_session("main", "");
    let t = task("badsnap");
    block_on(rt.create(&s, &t, "one")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let head = block_on(h.log.info(&t)).unwrap().head;
    let broken = noeta_core::store::Snapshot {
        seq: head,
        plugin_set: s.folder.plugin_set().to_owned(),
        state: json!({"not": "a state"}).to_string(),
    };
    block_on(h.log.put_snapshot(&t, &broken)).unwrap();
    block_on(rt.send(&s, &t, "two")).unwrap();
    assert!(matches!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended { .. }
    ));
    assert!(!h.core_kinds(&t).contains(&"fold_failed".to_owned()));
    assert_eq!(block_on(rt.load(&s, &t)).unwrap().core.messages.len(), 4);
}

#[test]
fn erasing_a_user_message_reaches_every_reduce_and_drops_the_message() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "a" }]));
    let s = session(vec![Arc::new(Counter)]);
    let t = task("erase");
    block_on(rt.create(&s, &t, "secret")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    let mut events = h.events(&t);
    let user_seq = events
        .iter()
        .find(|e| e.record.kind == "user_message")
        .unwrap()
        .seq;
    events.push(Event {
        seq: events.len() as u64 + 1,
        record: CoreRecord::Erased { seq: user_seq }.to_record().into(),
    });
    let state = s.folder.fold(&events).unwrap();
    assert!(state.core.messages.iter().all(|m| m.text != "secret"));
    assert_eq!(
        state.ext_state("counter"),
        Some(&json!({"ticks": 1, "erased": [user_seq]}))
    );
}

#[test]
fn a_failing_reduce_names_the_extension_kind_and_seq() {
    let s = session(vec![Arc::new(Counter)]);
    let events = vec![Event {
        seq: 1,
        record: Record::new("counter", "bogus", json!({})).into(),
    }];
    let err = s.folder.fold(&events).unwrap_err();
    assert_eq!(
        err.to_string(),
        "extension `counter` failed to fold record `bogus` at seq 1: unknown kind bogus"
    );
}

#[test]
fn a_fold_that_fails_on_three_claims_fails_the_task() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let s = session(vec![Arc::new(Counter)]);
    let t = task("unfoldable");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let lease = block_on(h.log.claim(&t, "someone", 10)).unwrap();
    block_on(
        h.log
            .append(&lease, &[Record::new("counter", "bogus", json!({}))]),
    )
    .unwrap();
    h.clock.advance(20);
    for round in 1..=3 {
        let err = block_on(rt.run(&s, &t)).unwrap_err();
        assert!(matches!(err, RunError::Fold(_)), "round {round}: {err}");
        h.clock.advance(2_000);
    }
    let kinds = h.core_kinds(&t);
    assert_eq!(kinds.iter().filter(|k| *k == "fold_failed").count(), 3);
    assert_eq!(kinds.last().map(String::as_str), Some("task_failed"));
    // Later claims leave the failed task alone.
    assert!(block_on(rt.run(&s, &t)).is_err());
    assert_eq!(h.core_kinds(&t).len(), kinds.len());
}

#[test]
fn a_plugin_payload_with_a_spilled_key_among_others_is_its_own_data() {
    let h = Harness::new();
    let record = Record::new(
        "p",
        "k",
        json!({"$spilled": {"sha256": "x", "len": 1, "media_type": "t"}, "more": 1}),
    );
    let event = noeta_core::store::Event::new(1, record.clone());
    let back = block_on(noeta_core::records::hydrate(event, h.content.as_ref())).unwrap();
    assert_eq!(*back.record, record);
}
