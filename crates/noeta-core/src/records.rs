//! The kernel's own records (extension `core`), each kind with a typed payload, and payload spilling.
//!
//! Plugins never invent event types: everything in a task's log is a
//! [`Record`] of some extension. The kernel's entries are records of
//! extension [`CORE`]; [`CoreRecord`] gives each kind its typed payload. A
//! record whose payload would exceed the store's limit is *spilled*: its
//! payload goes to the content store and the record carries the ref, so the
//! log stays small and a fold reads the body back ([`hydrate`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The model wire types a reply record holds, defined with the others.
use crate::model::{SharedText, StopReason, ToolCall, Usage};
use crate::store::{ContentRef, ContentStore, Event, MAX_RECORD_BYTES, Record, StoreError};

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The extension name the kernel records under.
pub const CORE: &str = "core";

/// The key of a spilled record's payload ref.
const SPILLED: &str = "$spilled";

/// The record kind every `reduce` receives when a user message is erased.
pub const ERASED_KIND: &str = "erased";

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The tool ran and returned.
    Ok,
    /// The tool ran and failed, or its input was invalid.
    Error,
    /// A guard denied it.
    Denied,
    /// A crash left its outcome unknown.
    Unknown,
}

/// One plugin a task ran with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PluginPin {
    /// The plugin's name.
    pub name: String,
    /// `builtin`, `crate` or `file`.
    pub source: String,
    /// Its version; for an on-disk plugin `sha256:` and the hash of every file of its directory
    /// (`canonical::tree_sha256`; its manifest alone for a manifest given by itself).
    pub version: String,
    /// SHA-256 of its params in canonical form (secret references hashed as written).
    pub params: String,
}

/// A child a tool asked for, created by the runner when the call's records commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnOrder {
    /// The child task's id.
    pub child: String,
    /// The agent it runs.
    pub agent: String,
    /// Its first user message.
    pub goal: String,
    /// What each extension hands it (`inherit`), by extension name.
    pub inherited: BTreeMap<String, Value>,
    /// It runs in the background: the call does not wait for it, and its result is delivered
    /// to the task as a message once it finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

/// How a child task ended, as its parent's tool sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildResult {
    /// The child task's id.
    pub task: String,
    /// The agent it ran.
    pub agent: String,
    /// Whether its turn ended normally.
    pub ok: bool,
    /// Its final reply, or why it failed.
    pub text: String,
}

/// What wakes a parked call; its tool's `resume` receives it, exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Wake {
    /// The answer to the call's question.
    Answer {
        /// The answer.
        answer: Value,
    },
    /// Every child finished.
    Children {
        /// The children's results, in spawn order.
        results: Vec<ChildResult>,
    },
}

/// The kernel's record kinds, with typed payloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CoreRecord {
    /// The task was created for an agent.
    TaskStarted {
        /// The agent's name.
        agent: String,
        /// The parent task, for a child.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        /// How far below the root task this one is.
        #[serde(default, skip_serializing_if = "is_zero")]
        depth: u32,
        /// What each of the parent's extensions handed it (`inherit`), by extension name.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        inherited: BTreeMap<String, Value>,
        /// What the host that made the task keeps with it (`Runtime::with_host_facts`: the
        /// model it runs on, as the host names it — never a secret).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<Value>,
    },
    /// The plugins and identity the task runs with (first start, and whenever they change).
    PluginsPinned {
        /// The agent's identity hash.
        identity: String,
        /// The plugins, sorted by name.
        pins: Vec<PluginPin>,
    },
    /// A user message arrived.
    UserMessage {
        /// Its text (shared with the message the fold makes of it).
        text: SharedText,
    },
    /// The model replied.
    AssistantReply {
        /// Its text (shared with the message the fold makes of it).
        text: SharedText,
        /// The tool calls it made, in order.
        calls: Arc<[ToolCall]>,
        /// Why it stopped.
        stop: StopReason,
        /// Token usage.
        usage: Usage,
        /// Provider blocks the reply carried besides its text and calls (Anthropic `thinking` and
        /// `redacted_thinking` blocks, signatures included), opaque to the runtime: recorded with
        /// the reply and sent back verbatim with it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<Value>,
    },
    /// The turn-intake hooks ran for the user message at `seq`.
    IntakeDone {
        /// The user message's sequence number.
        seq: u64,
    },
    /// A kernel note; its record message enters the conversation (nudges, refused finishes).
    Note {
        /// Why the note was added.
        reason: String,
    },
    /// A tool call is about to run (committed before it runs).
    CallStarted {
        /// The call's id (shared with the open call and the tool message the fold makes).
        call_id: SharedText,
        /// The tool (shared with the open call the fold makes of it).
        tool: SharedText,
        /// The input it runs with (after any rewrite), shared likewise.
        input: Arc<Value>,
    },
    /// A call must wait for a person's answer; the turn parks.
    CallParked {
        /// The call's id.
        call_id: String,
        /// What is asked.
        question: String,
    },
    /// A tool parked its call: on a question, on the children it spawned, or both.
    ToolParked {
        /// The call's id.
        call_id: String,
        /// The question, when it waits for an answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<String>,
        /// The children it spawned, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        children: Vec<SpawnOrder>,
    },
    /// The task continues another task's conversation (a fork, a resumed child).
    Continued {
        /// The task it continues.
        from: String,
        /// The conversation it starts from.
        messages: Vec<crate::model::Message>,
        /// Each extension's state, as its `continue_state` decided, by extension name.
        states: BTreeMap<String, Value>,
    },
    /// A woken call's `resume` is about to run (so it runs at most once).
    ResumeStarted {
        /// The call's id.
        call_id: String,
    },
    /// The answer to a tool's question arrived.
    CallAnswered {
        /// The call's id.
        call_id: String,
        /// The answer.
        answer: Value,
    },
    /// A call started children it does not wait for (recorded with its result).
    BackgroundStarted {
        /// The call's id.
        call_id: String,
        /// The children.
        children: Vec<SpawnOrder>,
    },
    /// A background child finished and its result reached the task (the record's message);
    /// the task takes a turn on it.
    BackgroundDelivered {
        /// The child's result.
        result: ChildResult,
    },
    /// Every child of a parked call finished: the wake, recorded once.
    ChildrenFinished {
        /// The call's id.
        call_id: String,
        /// The children's results, in spawn order.
        results: Vec<ChildResult>,
    },
    /// A claim could not fold the log (a failing `reduce`); three in a row fail the task.
    FoldFailed {
        /// Why.
        reason: String,
    },
    /// A worker without a pinned plugin refused the task; three in a row fail it.
    ClaimRefused {
        /// The missing plugin.
        plugin: String,
    },
    /// A person answered a gate's ask about a call.
    AskAnswered {
        /// The call's id.
        call_id: String,
        /// Whether the call may run.
        allow: bool,
    },
    /// A tool call ended.
    CallFinished {
        /// The call's id (shared with the tool message the fold makes).
        call_id: SharedText,
        /// The tool.
        tool: String,
        /// The text the model sees (a bounded preview when the full body overflowed), shared
        /// with the message the fold makes of it.
        text: SharedText,
        /// How it ended.
        outcome: CallOutcome,
        /// The full body, when the text is a preview.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        full: Option<ContentRef>,
        /// Images the result carries, in the content store.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<ContentRef>,
    },
    /// The request for one model call was composed; the hash of each segment.
    RequestComposed {
        /// System text and tool schemas.
        stable: String,
        /// Residents.
        residents: String,
        /// The conversation and the tail.
        dynamic: String,
    },
    /// The turn ended normally.
    TurnEnded {
        /// Why.
        reason: String,
    },
    /// The turn failed.
    TurnFailed {
        /// Why.
        reason: String,
    },
    /// The task failed for good.
    TaskFailed {
        /// Why.
        reason: String,
    },
    /// A user message was erased; every `reduce` sees this.
    Erased {
        /// The erased message's sequence number.
        seq: u64,
    },
}

impl CoreRecord {
    /// The record to append, with a message that enters the conversation.
    pub fn with_message(self, message: impl Into<String>) -> Record {
        self.to_record().with_message(message)
    }

    /// The record to append: the variant's name is the kind, its fields the payload. The
    /// record keeps this typed form too (moved, not copied) for the fold.
    pub fn to_record(self) -> Record {
        let tagged = serde_json::to_value(&self).unwrap_or(Value::Null);
        let (kind, data) = match tagged {
            Value::Object(map) => map.into_iter().next().unwrap_or_default(),
            _ => (String::new(), Value::Null),
        };
        Record::with_typed(CORE, kind, data, std::sync::Arc::new(self))
    }

    /// The typed form a `core` record was made from, when the kernel made it in this process
    /// (the record's cache). Debug builds (every test) check it is what the payload decodes to.
    pub(crate) fn kept(record: &Record) -> Option<&Self> {
        let typed = record.typed_cache()?.downcast_ref::<Self>()?;
        debug_assert!(
            matches!(Self::decode(record), Some(Ok(ref decoded)) if decoded == typed),
            "core record `{}` no longer matches its payload: {:?}",
            record.kind,
            record.data
        );
        Some(typed)
    }

    /// The typed form of a `core` record; `None` for other extensions' records.
    pub fn from_record(record: &Record) -> Option<Result<Self, serde_json::Error>> {
        match Self::kept(record) {
            Some(typed) => Some(Ok(typed.clone())),
            None => Self::decode(record),
        }
    }

    /// The typed form decoded from the record's payload, whether or not it kept one.
    pub(crate) fn decode(record: &Record) -> Option<Result<Self, serde_json::Error>> {
        use serde::de::IntoDeserializer;
        (record.extension == CORE).then(|| {
            // One entry, kind → payload, both borrowed: no copy of the record's data.
            let entry = std::iter::once((record.kind.as_str(), (&record.data).into_deserializer()));
            let map: serde::de::value::MapDeserializer<'_, _, serde_json::Error> =
                serde::de::value::MapDeserializer::new(entry);
            Self::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        })
    }
}

/// Moves an oversized payload (and message) to the content store; the record keeps the ref.
pub async fn spill(record: Record, content: &dyn ContentStore) -> Result<Record, StoreError> {
    Ok(spilled(&record, content).await?.unwrap_or(record))
}

/// What is written in `record`'s place when its payload is oversized (moved to the content
/// store, the ref kept); `None` when it is written as it is.
pub async fn spilled(
    record: &Record,
    content: &dyn ContentStore,
) -> Result<Option<Record>, StoreError> {
    if record.payload_within(MAX_RECORD_BYTES) {
        return Ok(None);
    }
    let body = json!({ "data": record.data, "message": record.message });
    let bytes = crate::canonical::to_bytes(&body);
    let reference = content.put("application/json", &bytes).await?;
    Ok(Some(Record::new(
        record.extension.clone(),
        record.kind.clone(),
        json!({ SPILLED: reference }),
    )))
}

/// Reads a spilled record's payload back; other records are returned as they are.
pub async fn hydrate(mut event: Event, content: &dyn ContentStore) -> Result<Event, StoreError> {
    if let Some(record) = unspill(&event.record, content).await? {
        event.record = std::sync::Arc::new(record);
    }
    Ok(event)
}

/// [`hydrate`] for a whole read, in place: only spilled records are touched.
pub async fn hydrate_all(
    events: &mut [Event],
    content: &dyn ContentStore,
) -> Result<(), StoreError> {
    // A record the kernel made in this process was never spilled: its payload is not looked at.
    for event in events
        .iter_mut()
        .filter(|e| CoreRecord::kept(&e.record).is_none())
    {
        if let Some(record) = unspill(&event.record, content).await? {
            event.record = std::sync::Arc::new(record);
        }
    }
    Ok(())
}

/// The record a spilled one stands for; `None` when it was not spilled.
async fn unspill(
    record: &Record,
    content: &dyn ContentStore,
) -> Result<Option<Record>, StoreError> {
    // Spilled payloads are exactly `{"$spilled": <ref>}`; anything else is a plugin's own data.
    let spilled = match &record.data {
        Value::Object(map) if map.len() == 1 => map.get(SPILLED),
        _ => None,
    };
    let Some(reference) =
        spilled.and_then(|r| serde_json::from_value::<ContentRef>(r.clone()).ok())
    else {
        return Ok(None);
    };
    let bytes = content.get(&reference).await?;
    let body: Value = serde_json::from_slice(&bytes).map_err(|err| StoreError::Backend {
        message: format!("spilled payload {} is not JSON: {err}", reference.sha256),
    })?;
    let mut full = Record::new(
        record.extension.clone(),
        record.kind.clone(),
        body.get("data").cloned().unwrap_or(Value::Null),
    );
    full.message = body
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Some(full))
}
