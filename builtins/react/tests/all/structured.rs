//! Structured output through the real runtime: nudges, schema checks, the recorded answer.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::executor::block_on;
use noeta_builtin_react::{STRUCTURED_OUTPUT, structured_result};
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, build_session};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, CompileError, CompiledAgent, LoadOptions, PluginSource,
    compile_agent, load_plugins, standard_registry,
};
use serde_json::{Value, json};

fn compile(settings: Value) -> Result<(noeta_core::PluginSet, CompiledAgent), CompileError> {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_react::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["react".into()];
    if !settings.is_null() {
        options.config.insert("react".into(), settings);
    }
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default())?;
    Ok((set, compiled))
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": { "answer": { "type": "integer" } },
        "required": ["answer"],
        "additionalProperties": false
    })
}

fn session() -> Session {
    let (set, compiled) = compile(json!({ "structured_output_schema": schema() })).unwrap();
    build_session(&set, &compiled, &BTreeMap::new(), None).unwrap()
}

fn runtime(turns: Value) -> Runtime {
    let provider =
        ScriptedProvider::from_json(&json!({ "turns": turns }).to_string(), "test").unwrap();
    Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    )
}

fn answer(input: Value) -> Value {
    json!({ "calls": [{ "name": STRUCTURED_OUTPUT, "input": input }] })
}

#[test]
fn a_text_reply_is_nudged_a_bad_answer_corrected_and_the_answer_recorded() {
    let s = session();
    let rt = runtime(json!([
        { "text": "it is 42" },
        answer(json!({ "answer": "forty-two" })),
        answer(json!({ "answer": 42 }))
    ]));
    let t = TaskId::new("answer").unwrap();
    block_on(rt.create(&s, &t, "what is six times seven?")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(structured_result(&state), Some(&json!({ "answer": 42 })));
    let tool: Vec<&str> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text.as_str())
        .collect();
    assert!(
        tool[0].starts_with(
            "structured_output: invalid input — /answer: \"forty-two\" is not of type \"integer\""
        ),
        "{tool:?}"
    );
    assert_eq!(tool[1], "Recorded the structured answer.");
    let nudges: Vec<&str> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Context)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    assert!(nudges[0].contains("(1 of 2 reminders)"), "{nudges:?}");
}

#[test]
fn after_two_nudges_the_turn_ends_without_an_answer_and_says_so() {
    let s = session();
    let rt = runtime(json!([{ "text": "a" }, { "text": "b" }, { "text": "c" }]));
    let t = TaskId::new("stubborn").unwrap();
    block_on(rt.create(&s, &t, "answer in JSON")).unwrap();
    let outcome = block_on(rt.run(&s, &t)).unwrap();
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(structured_result(&state), None);
    assert_eq!(
        state.ext_state(STRUCTURED_OUTPUT),
        Some(&json!({ "turn": 0, "nudges": 2 }))
    );
    let missing = block_on(rt.log().read(&t, 0))
        .unwrap()
        .into_iter()
        .filter(|e| e.record.extension == STRUCTURED_OUTPUT && e.record.kind == "missing")
        .count();
    assert_eq!(missing, 1);
}

#[test]
fn each_turn_needs_its_own_answer() {
    let s = session();
    let rt = runtime(json!([
        answer(json!({ "answer": 1 })),
        answer(json!({ "answer": 2 }))
    ]));
    let t = TaskId::new("turns").unwrap();
    block_on(rt.create(&s, &t, "first")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    block_on(rt.send(&s, &t, "second")).unwrap();
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        structured_result(&state),
        None,
        "the new turn has no answer yet"
    );
    block_on(rt.run(&s, &t)).unwrap();
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(structured_result(&state), Some(&json!({ "answer": 2 })));
}

#[test]
fn it_mounts_at_600_only_with_a_schema_and_bad_schemas_name_the_setting() {
    let names = |compiled: &CompiledAgent| -> Vec<String> {
        compiled
            .control_tools
            .iter()
            .map(|m| m.tool.name().to_owned())
            .collect()
    };
    let (_, compiled) = compile(Value::Null).unwrap();
    assert_eq!(names(&compiled), ["RecallHistory"]);
    let (_, compiled) = compile(json!({ "structured_output_schema": schema() })).unwrap();
    assert_eq!(names(&compiled), ["RecallHistory", STRUCTURED_OUTPUT]);
    assert_eq!(compiled.control_tools[1].tool.input_schema(), schema());

    let err = |setting: Value| match compile(json!({ "structured_output_schema": setting })) {
        Ok(_) => panic!("the agent should not compile"),
        Err(err) => err.to_string(),
    };
    let prefix = "plugin `react`: control tool `structured_output` cannot be built for agent `main`: settings [plugins.react] structured_output_schema";
    assert_eq!(
        err(json!("an integer")),
        format!("{prefix}: expected a JSON Schema object, got `\"an integer\"`")
    );
    assert_eq!(
        err(json!({ "type": "array" })),
        format!(
            "{prefix}: the answer is the tool's input, so the schema must have `\"type\": \"object\"` (got `\"array\"`)"
        )
    );
    assert!(
        err(json!({ "type": "object", "properties": { "a": { "type": "strin" } } }))
            .starts_with(&format!("{prefix}: not a valid JSON Schema")),
    );
}
