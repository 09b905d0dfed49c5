//! The session pack: what it mounts with and without a search key, its settings errors, and a
//! WebFetch call through the runtime with the task's model answering the prompt.

use std::collections::BTreeMap;
use std::sync::Arc;

use noeta_core::extension::View;
use noeta_core::fold::TaskState;
use noeta_core::model::Role;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::session::{Session, SessionError, build_session};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_core::{
    ActivationRules, AgentOptions, LoadOptions, PluginSource, compile_agent, load_plugins,
    standard_registry,
};
use serde_json::{Value, json};

use crate::common::{Reply, Server};

/// A session of agent `main` with the web plugin, `settings` (none when null) and an optional
/// tool allow-list.
fn session_with(settings: Value, tools: Option<&[&str]>) -> Result<Session, SessionError> {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_web::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["web".into()];
    options.tools = tools.map(|t| t.iter().map(|n| (*n).into()).collect());
    let compiled = compile_agent(&set, &merged, &options, &ActivationRules::default()).unwrap();
    let config = if settings.is_null() {
        BTreeMap::new()
    } else {
        BTreeMap::from([("web".to_owned(), settings)])
    };
    build_session(&set, &compiled, &config, None)
}

fn session(settings: Value) -> Result<Session, SessionError> {
    session_with(settings, None)
}

/// The names of the tools the session offers, in offer order.
fn offered(session: &Session) -> Vec<String> {
    let task = TaskId::new("tools").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &session.extensions);
    session
        .extensions
        .iter()
        .flat_map(|e| e.tools(&view).unwrap())
        .map(|t| t.name().to_owned())
        .collect()
}

#[test]
fn without_a_search_key_only_webfetch_is_offered() {
    assert_eq!(offered(&session(Value::Null).unwrap()), ["WebFetch"]);
    assert_eq!(
        offered(&session(json!({ "max_bytes": 2048 })).unwrap()),
        ["WebFetch"]
    );
}

#[test]
fn with_a_search_key_websearch_is_offered_too() {
    let session = session(json!({ "search_api_key": "k" })).unwrap();
    assert_eq!(offered(&session), ["WebFetch", "WebSearch"]);
}

#[test]
fn the_agents_tool_list_still_holds() {
    let session = session_with(json!({ "search_api_key": "k" }), Some(&["WebSearch"])).unwrap();
    assert_eq!(offered(&session), ["WebSearch"]);
}

#[test]
fn the_manifest_declares_the_pack_and_its_tools() {
    let manifest = include_str!("../../noeta-plugin.toml");
    assert!(manifest.contains("name = \"web\"\nref = \"noeta_builtin_web::web\"\npriority = 200"));
    for tool in ["WebFetch", "WebSearch"] {
        assert!(
            manifest.contains(&format!(
                "surface = \"tool\"\nname = \"{tool}\"\npack = \"web\""
            )),
            "{tool} is declared as mounted by the pack"
        );
    }
}

#[test]
fn bad_settings_fail_the_session_naming_the_plugin_the_key_and_the_value() {
    for (settings, needle) in [
        (json!({ "search_key": "k" }), "unknown key `search_key`"),
        (
            json!({ "max_bytes": -1 }),
            "max_bytes: expected a positive integer, got `-1`",
        ),
        (
            json!({ "cache_ttl_secs": "15m" }),
            "cache_ttl_secs: expected a whole number of seconds, got `\"15m\"`",
        ),
        (
            json!({ "search_endpoint": "mailto:x@y" }),
            "search_endpoint: `mailto:x@y` is not an http or https URL",
        ),
        (
            json!({ "search_api_key": "{env:NOETA_SEARCH_KEY}" }),
            "search_api_key: the secret reference `{env:NOETA_SEARCH_KEY}` was not resolved",
        ),
    ] {
        let Err(err) = session(settings) else {
            panic!("the session was built");
        };
        let text = err.to_string();
        assert!(text.contains("web"), "{text}");
        assert!(text.contains("settings [plugins.web]"), "{text}");
        assert!(text.contains(needle), "{text} (wanted {needle})");
    }
}

#[tokio::test]
async fn through_the_runtime_the_tasks_model_answers_the_prompt() {
    let server = Server::start().await;
    server.route(
        "/notes",
        Reply::html("<h1>Notes</h1><p>Version 3 shipped.</p>"),
    );
    let script = json!({
        "turns": [
            { "calls": [{ "name": "WebFetch", "input": { "url": server.url("/notes"), "prompt": "Which version shipped?" } }] },
            { "text": "done" }
        ],
        "auxiliary": ["Version 3."]
    });
    let provider = ScriptedProvider::from_json(&script.to_string(), "test").unwrap();
    let rt = Runtime::new(
        Arc::new(MemoryEventLog::new(ManualClock::at(0))),
        Arc::new(MemoryContentStore::new()),
        Arc::new(provider),
    );
    let session = session(Value::Null).unwrap();
    let task = TaskId::new("t").unwrap();
    rt.create(&session, &task, "read the notes").await.unwrap();
    rt.run(&session, &task).await.unwrap();
    let state = rt.load(&session, &task).await.unwrap();
    let results: Vec<_> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .collect();
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{}", results[0].text);
    assert!(
        results[0].text.starts_with(noeta_builtin_web::PROVENANCE),
        "{}",
        results[0].text
    );
    assert!(
        results[0].text.ends_with("\n\nVersion 3."),
        "{}",
        results[0].text
    );
    assert_eq!(server.hits("/notes"), 1);
}
