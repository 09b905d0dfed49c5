//! Fixture plugins: small real values for tests that need a tool, a guard or a linked plugin.

use async_trait::async_trait;
use noeta_core::{
    Guard, GuardInput, LinkedPlugin, RefTable, Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
    Verdict,
};
use serde_json::{Value, json};

/// A read-only tool that answers with its input's `text` field.
#[derive(Debug, Clone)]
pub struct EchoTool {
    name: String,
}

impl EchoTool {
    /// An echo tool with the given model-visible name.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
        }
    }
}

#[async_trait]
impl Tool for EchoTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Echoes the `text` it is given."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match input.get("text").and_then(Value::as_str) {
            Some(text) => Ok(ToolOutput::text(text)),
            None => Err(ToolError::RespondToModel(format!(
                "{}: `text` is required",
                self.name
            ))),
        }
    }
}

/// A guard that denies every call of one tool.
#[derive(Debug, Clone)]
pub struct DenyTool {
    /// The tool it denies.
    pub tool: String,
}

impl Guard for DenyTool {
    fn check(&self, input: &GuardInput) -> Option<Verdict> {
        match &input.checkpoint {
            noeta_core::Checkpoint::ToolCall { tool, .. } if *tool == self.tool => {
                Some(Verdict::Deny {
                    reason: format!("`{tool}` is denied by the fixture guard"),
                })
            }
            _ => None,
        }
    }
}

/// A linked third-party plugin from a manifest kept for the life of the process.
pub fn linked(crate_name: &str, manifest: &str, resolver: RefTable) -> LinkedPlugin {
    let crate_name: &'static str = Box::leak(crate_name.to_owned().into_boxed_str());
    let manifest: &'static str = Box::leak(manifest.to_owned().into_boxed_str());
    LinkedPlugin::new(crate_name, manifest, resolver)
}
