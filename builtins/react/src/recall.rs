//! History recall: `RecallHistory` (control tool, schema priority 550) reads the messages a
//! compaction collapsed back verbatim, and the `collapsed-context` reminder (350) tells the
//! model they exist while a summary is in force.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::model::{Message, Role};
use noeta_core::{
    ControlToolFactory, ControlToolMount, Reminder, ReminderInput, SessionBuildContext, Tool,
    ToolContext, ToolError, ToolFlags, ToolOutput,
};
use noeta_toolkit::compaction;
use serde_json::{Value, json};

use crate::compaction::Settings;

/// The tool's model-visible name.
pub const RECALL_HISTORY: &str = "RecallHistory";
/// Messages one call returns by default, and at most.
const DEFAULT_LIMIT: u64 = 20;
/// The most messages one call returns.
pub const MAX_LIMIT: u64 = 50;
/// Each message is clipped to this many characters.
const BLOCK_CHARS: usize = 2_000;
/// The whole answer is kept to this many characters.
const OUTPUT_CHARS: usize = 24_000;

fn role_name(message: &Message) -> String {
    match message.role {
        Role::User => "user".to_owned(),
        Role::Assistant => "assistant".to_owned(),
        Role::Tool if message.is_error => "tool result (error)".to_owned(),
        Role::Tool => "tool result".to_owned(),
        Role::Context => "context".to_owned(),
    }
}

fn block(index: usize, message: &Message) -> String {
    let mut text = message.text.as_str().to_owned();
    for call in message.calls.iter() {
        text.push_str(&format!("\n[tool call {} {}]", call.name, call.input));
    }
    for image in &message.attachments {
        text.push_str(&format!(
            "\n[an image was attached ({}); read the file again to see it]",
            image.media_type
        ));
    }
    if text.chars().count() > BLOCK_CHARS {
        let kept: String = text.chars().take(BLOCK_CHARS).collect();
        text = format!("{kept} … [clipped]");
    }
    format!("#{index} {}:\n{text}", role_name(message))
}

/// Reads collapsed messages back.
struct RecallHistory;

#[async_trait]
impl Tool for RecallHistory {
    fn name(&self) -> &str {
        RECALL_HISTORY
    }

    fn description(&self) -> &str {
        "Read back, verbatim, messages of this conversation that were collapsed into a summary to save context. Messages are numbered from 0, oldest first; give the first one to read as `offset` and how many as `limit` (default 20, at most 50). Each message is clipped to 2,000 characters. Use it when the summary lacks a detail you need."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The number of the first collapsed message to read, from 0"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": "How many messages to read (default 20)"
                }
            },
            "required": ["offset"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        // A way back to the agent's own history, not a capability: no allow-list drops it.
        ToolFlags::read_only().past_agent_lists()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIMIT)
            .min(MAX_LIMIT);
        let state = compaction::read(ctx);
        let keep = state.keep_from_seq();
        let messages = &ctx.core().messages;
        let collapsed = messages.partition_point(|m| m.seq < keep);
        if collapsed == 0 {
            return Ok(ToolOutput::error(
                "RecallHistory: nothing has been collapsed; the whole conversation is in view.",
            ));
        }
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if start >= collapsed {
            return Ok(ToolOutput::error(format!(
                "RecallHistory: offset {offset} is past the collapsed messages (0 to {}).",
                collapsed - 1
            )));
        }
        let end = start
            .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
            .min(collapsed);
        let mut out = format!(
            "Collapsed messages {start} to {} of 0 to {}:",
            end - 1,
            collapsed - 1
        );
        let mut shown = start;
        for (i, message) in messages[start..end].iter().enumerate() {
            let next = block(start + i, message);
            if out.len() + next.len() + 2 > OUTPUT_CHARS {
                break;
            }
            out.push_str("\n\n");
            out.push_str(&next);
            shown = start + i + 1;
        }
        if shown < end {
            out.push_str(&format!(
                "\n\n[output limit reached: read on with offset {shown}]"
            ));
        } else if end < collapsed {
            out.push_str(&format!("\n\n[more: read on with offset {end}]"));
        }
        Ok(ToolOutput::text(out))
    }
}

/// Mounts `RecallHistory` unless compaction is switched off.
pub(crate) struct Factory;

impl ControlToolFactory for Factory {
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        let settings = Settings::from_context(ctx)?;
        Ok(settings
            .enabled()
            .then(|| ControlToolMount::new(Arc::new(RecallHistory))))
    }
}

/// The `collapsed-context` reminder: speaks while a summary stands in for earlier messages.
pub(crate) struct CollapsedContext;

impl Reminder for CollapsedContext {
    fn render(&self, input: &ReminderInput<'_>) -> Option<String> {
        let state = compaction::read(input.state);
        let keep = state.keep_from_seq();
        let collapsed = input.core.messages.partition_point(|m| m.seq < keep);
        (collapsed > 0).then(|| {
            format!(
                "Messages 0 to {} of this conversation are collapsed into the summary above. If you need an exact detail from them (a path, an error, a requirement), read them with {RECALL_HISTORY} rather than guessing.",
                collapsed - 1
            )
        })
    }
}
