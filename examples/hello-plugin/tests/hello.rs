//! The example plugin, linked into a host beside the built-ins: listed, merged, activated and run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use futures::executor::block_on;
use noeta::{HostOptions, HostPaths, activation_rules};
use noeta_core::{AgentOptions, SourceKind, ToolContext, compile_agent};
use serde_json::json;

fn host() -> noeta_core::PluginSet {
    let dir = std::env::temp_dir().join("hello-plugin-test-workspace");
    let paths = HostPaths {
        home: None,
        workspace: dir,
    };
    let options = HostOptions {
        linked: vec![hello_plugin::plugin()],
        ..HostOptions::default()
    };
    noeta::load(&paths, &options).unwrap()
}

#[test]
fn the_plugin_is_listed_as_a_linked_crate_with_both_contributions() {
    let set = host();
    let hello = set.get("hello").expect("hello is loaded");
    assert_eq!(hello.source, SourceKind::Crate);
    assert_eq!(hello.manifest.version.as_deref(), Some("0.1.0"));
    let surfaces: Vec<(&str, &str)> = hello
        .manifest
        .contributions
        .iter()
        .map(|c| (c.surface.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        surfaces,
        [("prompt_fragment", "greeting-style"), ("tool", "Hello")]
    );
    let merged = set.merged().unwrap();
    assert!(
        merged
            .for_surface("tool")
            .iter()
            .any(|e| e.plugin == "hello")
    );
}

#[test]
fn an_agent_activating_hello_gets_the_fragment_and_the_tool() {
    let set = host();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("greeter");
    options.instructions = "You greet people.".to_owned();
    options.plugins = vec!["hello".to_owned()];
    let agent = compile_agent(&set, &merged, &options, &activation_rules()).unwrap();
    assert_eq!(
        agent.spec.instructions,
        format!("You greet people.\n\n{}", hello_plugin::GREETING_STYLE)
    );
    assert_eq!(agent.spec.tools.len(), 1);
    assert_eq!(agent.spec.tools[0].name, "Hello");
    assert_eq!(agent.spec.tools[0].plugin, "hello");

    let tool = &agent.tools["Hello"];
    let out = block_on(tool.run(json!({"name": "Ada"}), &ToolContext::new("t1", "c1"))).unwrap();
    assert_eq!(out.text, "Hello, Ada!");
    let empty = block_on(tool.run(json!({"name": " "}), &ToolContext::new("t1", "c2"))).unwrap();
    assert!(empty.is_error);
}

#[test]
fn an_agent_that_does_not_activate_hello_is_untouched() {
    let set = host();
    let merged = set.merged().unwrap();
    let agent = compile_agent(
        &set,
        &merged,
        &AgentOptions::named("plain"),
        &activation_rules(),
    )
    .unwrap();
    assert!(agent.spec.tools.is_empty());
    assert!(agent.spec.prompt_fragments.is_empty());
}
