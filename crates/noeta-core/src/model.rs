//! The model wire types: a request as hooks and providers see it, the reply, the conversation's
//! messages and roles, tool calls, stop reasons and usage — in one place, shared by the
//! extension hooks, the log's records, the fold and the providers.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::Digest;

/// What a model request is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum Purpose {
    /// A step of the task: its reply is recorded and decided on.
    #[default]
    Step,
    /// A call on the side (a summary, a judgement), named by what asks it; its answer is the
    /// caller's to record.
    Auxiliary {
        /// What asks (`compaction`, `web_fetch`…).
        name: String,
    },
}

/// The model request as hooks see it before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRequest {
    /// What the request is for.
    pub purpose: Purpose,
    /// The agent whose task asks (empty for an auxiliary request made outside a task). Not
    /// sent to the model; a provider may route by it (the scripted provider does).
    #[serde(skip)]
    pub agent: String,
    /// The model replies in the task's conversation before this request (the step number, from
    /// zero; a fork counts the replies it continued from).
    pub step: u64,
    /// The stable system text.
    pub system: String,
    /// The offered tools' schemas, in offer order (shared from step to step while the offer
    /// stays the same; `Arc::make_mut` to change them).
    pub tools: Arc<Vec<Value>>,
    /// Non-tool request entries from `tool_changes`.
    pub entries: Vec<Value>,
    /// The residents.
    pub residents: Vec<String>,
    /// The conversation (shared with the folded state, not copied).
    pub messages: Arc<Vec<Message>>,
    /// Reminders and tail renders, after the conversation.
    pub tail: Vec<String>,
    /// The bodies of the images the conversation's messages carry, by SHA-256 (loaded by the
    /// runner after `before_model`, for the provider; not part of any hash, which covers the
    /// refs).
    #[serde(skip)]
    pub attachments: BTreeMap<String, crate::tool::Attachment>,
}

impl ModelRequest {
    /// An auxiliary request from `name`: a system text and a conversation, no tools.
    pub fn auxiliary(name: &str, system: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            purpose: Purpose::Auxiliary {
                name: name.to_owned(),
            },
            agent: String::new(),
            step: 0,
            system: system.into(),
            tools: Arc::new(Vec::new()),
            entries: Vec::new(),
            residents: Vec::new(),
            messages: Arc::new(messages),
            tail: Vec::new(),
            attachments: BTreeMap::new(),
        }
    }
}

/// The model's reply, as hooks see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    /// The text.
    pub text: String,
    /// The tool calls, in order.
    pub calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: Option<StopReason>,
    /// Token usage.
    pub usage: Usage,
    /// Provider blocks the reply carried besides its text and calls (Anthropic `thinking` and
    /// `redacted_thinking` blocks, signatures included), opaque to the runtime: recorded with
    /// the reply and sent back verbatim with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Value>,
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: String,
    /// The tool's model-visible name.
    pub name: String,
    /// The arguments.
    pub input: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its reply.
    EndTurn,
    /// It wants tools run.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
}

/// Token usage of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens (those read from or written to a prompt cache excluded).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cache_write_tokens: u64,
    /// What the call cost, in millionths of a US dollar, when the provider knows its price
    /// (summed in the task's state over the calls that had one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
    /// Text a record brought into the conversation (instructions, notices, reminders).
    Context,
}

/// One message of the conversation, with its hash computed once when folded in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The sequence number of the record it came from.
    pub seq: u64,
    /// Who speaks.
    pub role: Role,
    /// The text.
    pub text: String,
    /// Tool calls, for assistant messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ToolCall>,
    /// The call answered, for tool messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Whether a tool message is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// An assistant message's provider blocks besides text and calls (see
    /// [`ModelReply::reasoning`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Value>,
    /// A tool message's images, in the content store (their bodies travel with the request
    /// in [`ModelRequest::attachments`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::store::ContentRef>,
    /// The conversation's hash chain through this message: it identifies the whole conversation
    /// up to here, and is computed once, when the message is folded in.
    pub hash: Digest,
}

impl Message {
    pub(crate) fn new(
        seq: u64,
        role: Role,
        text: String,
        calls: Vec<ToolCall>,
        call_id: Option<String>,
        is_error: bool,
    ) -> Self {
        Self {
            seq,
            role,
            text,
            calls,
            call_id,
            is_error,
            reasoning: Vec::new(),
            attachments: Vec::new(),
            hash: Digest::default(),
        }
    }

    /// A message made at compose time rather than folded from the log (a summary standing in
    /// for a stretch of the conversation): `seq` places it, its hash is left for the chain to fill.
    pub fn synthetic(seq: u64, role: Role, text: impl Into<String>) -> Self {
        Self::new(seq, role, text.into(), Vec::new(), None, false)
    }
}
