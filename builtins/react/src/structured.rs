//! Structured output: the final answer as data matching a JSON Schema.
//!
//! When an agent's `[plugins.react] structured_output_schema` is set (an
//! object schema), the `structured_output` control tool mounts (schema render
//! priority 600) with that schema as its input schema, so the runtime checks
//! every answer against it before the tool runs and the model is told what
//! to fix. A valid call records the answer (`structured_output` / `result`)
//! and ends the turn. A turn that would end without one is refused with a
//! nudge, at most twice a turn; after that it ends, and `missing` is recorded.
//! [`structured_result`] reads the answer of the task's latest turn.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::TaskState;
use noeta_core::records::ERASED_KIND;
use noeta_core::{
    ControlToolFactory, ControlToolMount, SessionBuildContext, Tool, ToolContext, ToolError,
    ToolFlags, ToolOutput,
};
use serde_json::{Map, Value, json};

/// The tool's and the extension's name.
pub const STRUCTURED_OUTPUT: &str = "structured_output";
/// Nudges a turn gets before it may end without the answer.
pub const MAX_NUDGES: u64 = 2;
/// The setting that switches it on.
const SETTING: &str = "structured_output_schema";

/// The answer the task's latest turn recorded, if it did.
pub fn structured_result(state: &TaskState) -> Option<&Value> {
    let own = state.ext_state(STRUCTURED_OUTPUT)?;
    let turn = state.core.last_user.map(|i| i as u64);
    (own.get("turn").and_then(Value::as_u64) == turn)
        .then(|| own.get("result"))
        .flatten()
}

/// The `structured_output` tool: its input is the answer.
struct StructuredOutput {
    schema: Value,
}

#[async_trait]
impl Tool for StructuredOutput {
    fn name(&self) -> &str {
        STRUCTURED_OUTPUT
    }

    fn description(&self) -> &str {
        "Give your final answer as structured data. Call this once, when the work is done, with the answer as its input; it must match the schema. It ends your turn: a plain text reply does not count as the answer."
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn flags(&self) -> ToolFlags {
        // How an agent given an output schema answers: no allow-list drops it.
        ToolFlags::default()
            .run_last()
            .silent_reply_after()
            .retry_safe()
            .safe_while_planning()
            .past_agent_lists()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let turn = ctx.core().last_user.map(|i| i as u64);
        ctx.record(
            STRUCTURED_OUTPUT,
            "result",
            json!({ "value": input, "turn": turn }),
        );
        Ok(ToolOutput::text("Recorded the structured answer."))
    }
}

/// Folds the answer and the nudges, and refuses a turn's end without the answer.
struct Structured;

impl Structured {
    fn turn(view: &View<'_>) -> Option<u64> {
        view.core().last_user.map(|i| i as u64)
    }
}

#[async_trait]
impl Extension for Structured {
    fn name(&self) -> &str {
        STRUCTURED_OUTPUT
    }

    async fn before_finish(&self, view: &View<'_>) -> HookResult<Option<String>> {
        let turn = Self::turn(view);
        let own = view.ext_state(STRUCTURED_OUTPUT);
        let this_turn = own.and_then(|s| s.get("turn")).and_then(Value::as_u64) == turn;
        let field = |key: &str| own.filter(|_| this_turn).and_then(|s| s.get(key)).cloned();
        if field("result").is_some() {
            return Ok(None);
        }
        let nudges = field("nudges").and_then(|n| n.as_u64()).unwrap_or(0);
        if nudges >= MAX_NUDGES {
            view.record(STRUCTURED_OUTPUT, "missing", json!({ "turn": turn }));
            return Ok(None);
        }
        view.record(STRUCTURED_OUTPUT, "nudged", json!({ "turn": turn }));
        Ok(Some(format!(
            "Your answer has to be given with the `{STRUCTURED_OUTPUT}` tool: call it now with the final answer as its input, matching its schema. A plain text reply does not count ({} of {MAX_NUDGES} reminders).",
            nudges + 1
        )))
    }

    /// The answer and the nudges belong to the turn (the user message) they came in.
    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let turn = |state: &mut Value, at: Option<&Value>| {
            // A record of a later turn starts that turn afresh.
            if !state.is_object() || state.get("turn") != at {
                *state = json!({ "turn": at.cloned().unwrap_or(Value::Null) });
            }
        };
        match kind {
            "result" => {
                turn(state, data.get("turn"));
                let value = data.get("value").cloned().unwrap_or(Value::Null);
                if let Some(map) = state.as_object_mut() {
                    map.insert("result".to_owned(), value);
                }
            }
            "nudged" => {
                turn(state, data.get("turn"));
                let nudges = state.get("nudges").and_then(Value::as_u64).unwrap_or(0);
                if let Some(map) = state.as_object_mut() {
                    map.insert("nudges".to_owned(), json!(nudges + 1));
                }
            }
            "missing" => turn(state, data.get("turn")),
            ERASED_KIND => {}
            other => return Err(format!("unknown record kind `{other}`")),
        }
        Ok(())
    }
}

/// Mounts `structured_output` when the agent's settings give a schema.
pub(crate) struct Factory;

impl ControlToolFactory for Factory {
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        let Some(schema) = ctx.config("react").get(SETTING) else {
            return Ok(None);
        };
        let at = format!("settings [plugins.react] {SETTING}");
        let Some(object) = schema.as_object() else {
            return Err(format!(
                "{at}: expected a JSON Schema object, got `{schema}`"
            ));
        };
        if object.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "{at}: the answer is the tool's input, so the schema must have `\"type\": \"object\"` (got {})",
                object
                    .get("type")
                    .map_or("no `type`".to_owned(), |t| format!("`{t}`"))
            ));
        }
        jsonschema::validator_for(schema)
            .map_err(|err| format!("{at}: not a valid JSON Schema: {err}"))?;
        let schema = Value::Object(Map::clone(object));
        Ok(Some(
            ControlToolMount::new(Arc::new(StructuredOutput { schema }))
                .with_extension(Arc::new(Structured)),
        ))
    }
}
