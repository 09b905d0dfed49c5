//! `hello-plugin`: a third-party noeta plugin, written exactly as the built-ins are.
//!
//! Its manifest lives in its own `Cargo.toml` under `[package.metadata.noeta]`
//! and declares a prompt fragment and a tool; [`plugin`] pairs that manifest
//! with the resolver that maps the two refs to values. A host links it by
//! passing `hello_plugin::plugin()` to `noeta::HostOptions::linked`, and an
//! agent uses it by activating `hello`.

use std::sync::Arc;

use noeta_core::{LinkedPlugin, RefTable, Resolved, ToolFlags, ToolOutput};
use noeta_toolkit::FnTool;
use serde::Deserialize;
use serde_json::json;

/// The prompt fragment an activating agent's instructions gain.
pub const GREETING_STYLE: &str =
    "When you greet someone, use their name and keep the greeting to one sentence.";

/// The input of the `Hello` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloInput {
    /// Who to greet.
    pub name: String,
}

/// The `Hello` tool: greets someone by name.
pub fn hello_tool() -> FnTool<HelloInput> {
    FnTool::new(
        "Hello",
        "Greets someone by name.",
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet"}},
            "required": ["name"],
            "additionalProperties": false
        }),
        |input: HelloInput, _ctx| {
            Box::pin(async move {
                let name = input.name.trim();
                if name.is_empty() {
                    return Ok(ToolOutput::error("Hello: `name` must not be empty"));
                }
                Ok(ToolOutput::text(format!("Hello, {name}!")))
            })
        },
    )
    .with_flags(ToolFlags::read_only())
}

/// The plugin: the manifest from this crate's `Cargo.toml` and its resolver.
pub fn plugin() -> LinkedPlugin {
    let resolver = RefTable::new()
        .with("hello_plugin::GREETING_STYLE", |_| {
            Ok(Resolved::PromptFragment(GREETING_STYLE.to_owned()))
        })
        .with("hello_plugin::Hello", |_| {
            Ok(Resolved::Tool(Arc::new(hello_tool())))
        });
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../Cargo.toml"),
        resolver,
    )
}
