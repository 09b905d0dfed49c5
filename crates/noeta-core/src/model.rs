//! The model wire types: a request as hooks and providers see it, the reply, the conversation's
//! messages and roles, tool calls, stop reasons and usage — in one place, shared by the
//! extension hooks, the log's records, the fold and the providers.

use std::collections::BTreeMap;
use std::fmt;
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
    pub attachments: BTreeMap<String, Attachment>,
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

impl ToolCall {
    /// Appends the JSON of `calls` to `buf`, byte for byte what `serde_json::to_writer` writes
    /// for them, without going through a serializer: the conversation's hash chain writes the
    /// calls of every assistant message it links, and a fold from scratch links them all.
    pub(crate) fn write_json(calls: &[ToolCall], buf: &mut Vec<u8>) {
        buf.push(b'[');
        for (i, call) in calls.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(b"{\"id\":");
            write_json_str(&call.id, buf);
            buf.extend_from_slice(b",\"name\":");
            write_json_str(&call.name, buf);
            buf.extend_from_slice(b",\"input\":");
            write_json_value(&call.input, buf);
            buf.push(b'}');
        }
        buf.push(b']');
    }
}

/// A JSON value as `serde_json` writes it compactly (its map's own order).
fn write_json_value(value: &Value, buf: &mut Vec<u8>) {
    match value {
        Value::Null => buf.extend_from_slice(b"null"),
        Value::Bool(true) => buf.extend_from_slice(b"true"),
        Value::Bool(false) => buf.extend_from_slice(b"false"),
        Value::String(text) => write_json_str(text, buf),
        Value::Array(items) => {
            buf.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                write_json_value(item, buf);
            }
            buf.push(b']');
        }
        Value::Object(map) => {
            buf.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                write_json_str(key, buf);
                buf.push(b':');
                write_json_value(item, buf);
            }
            buf.push(b'}');
        }
        // Writing into a Vec cannot fail; numbers keep serde_json's own formatting.
        Value::Number(number) => {
            let _ = serde_json::to_writer(&mut *buf, number);
        }
    }
}

/// A JSON string as `serde_json` writes it: text with nothing to escape is copied as it is
/// (serde_json escapes only `"`, `\` and control characters).
fn write_json_str(text: &str, buf: &mut Vec<u8>) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        buf.reserve(text.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(text.as_bytes());
        buf.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *buf, text);
    }
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
    /// The text, shared with the record it came from (folding a message copies no text).
    pub text: SharedText,
    /// Tool calls, for assistant messages, shared with the reply's record.
    #[serde(default, skip_serializing_if = "no_calls")]
    pub calls: Arc<[ToolCall]>,
    /// The call answered, for tool messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<SharedText>,
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
        text: SharedText,
        calls: Arc<[ToolCall]>,
        call_id: Option<SharedText>,
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
    pub fn synthetic(seq: u64, role: Role, text: impl Into<SharedText>) -> Self {
        Self::new(seq, role, text.into(), Arc::default(), None, false)
    }
}

/// Whether a message carries no tool calls (then serialised without the field).
pub(crate) fn no_calls(calls: &Arc<[ToolCall]>) -> bool {
    calls.is_empty()
}

/// Text shared rather than copied: a message's text is the same allocation as the text of the
/// record it was folded from, and cloning a message copies none of it. It reads as a `str`,
/// compares with strings, and serialises as a JSON string.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedText(Arc<str>);

impl SharedText {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SharedText {
    fn from(text: &str) -> Self {
        Self(Arc::from(text))
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> Self {
        Self(Arc::from(text))
    }
}

impl From<&String> for SharedText {
    fn from(text: &String) -> Self {
        Self(Arc::from(text.as_str()))
    }
}

impl From<SharedText> for String {
    fn from(text: SharedText) -> Self {
        text.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedText> for str {
    fn eq(&self, other: &SharedText) -> bool {
        *self == *other.0
    }
}

impl PartialEq<SharedText> for &str {
    fn eq(&self, other: &SharedText) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedText> for String {
    fn eq(&self, other: &SharedText) -> bool {
        **self == *other.0
    }
}

impl Serialize for SharedText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedText {
    /// One copy of the text (serde's own `Arc<str>` goes through a `Box<str>` first).
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = SharedText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<SharedText, E> {
                Ok(SharedText::from(text))
            }
        }
        de.deserialize_str(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_written_as_serde_json_writes_them() {
        let tricky = [
            json!({}),
            json!(null),
            json!({"path": "src/lib.rs", "limit": 20, "ratio": 0.5, "neg": -3, "big": u64::MAX}),
            json!({"q": "quote \" backslash \\ tab \t nl \n nul \u{0} del \u{7f} é 😀 \u{2028}"}),
            json!({"nested": [1, [2, {"b": true, "a": false}], [], {}], "": "empty key"}),
            json!(["top", "level", 1.5e300, 1e-7]),
            json!("just a string"),
        ];
        let mut calls = Vec::new();
        for (n, input) in tricky.into_iter().enumerate() {
            calls.push(ToolCall {
                id: format!("call_{n}\u{1}\"x\""),
                name: if n % 2 == 0 {
                    "Read".into()
                } else {
                    "ünïcode\\name".into()
                },
                input,
            });
        }
        for end in 0..=calls.len() {
            let mut ours = Vec::new();
            ToolCall::write_json(&calls[..end], &mut ours);
            let theirs = serde_json::to_vec(&calls[..end]).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "first {end} calls"
            );
        }
    }
}

/// A binary body a result carries for the model to see (an image).
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    /// Its media type (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
    pub media_type: String,
    /// The bytes.
    #[serde(skip)]
    pub data: Arc<Vec<u8>>,
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attachment")
            .field("media_type", &self.media_type)
            .field("bytes", &self.data.len())
            .finish()
    }
}
