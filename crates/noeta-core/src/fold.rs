//! The fold: a task's state is a pure function of its log, applied one event at a time.
//!
//! The kernel folds its own `core` records into [`CoreState`] (the
//! conversation, open tool calls, the turn); every extension's `reduce` folds
//! its own records and those of the names it lists in `folds` into a JSON
//! value. Within one claim the runner applies each new batch once; a
//! [`Snapshot`] of the state lets a later claim fold only the tail, and is
//! ignored when it was made under a different plugin set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::canonical::{self, Digest};
use crate::model::SharedText;
/// The conversation's types, defined with the other model wire types.
use crate::model::{Message, Role};
use crate::model::{StopReason, Usage};
use crate::records::{CORE, CallOutcome, CoreRecord, ERASED_KIND, PluginPin, SpawnOrder, Wake};
use crate::store::{Event, Snapshot};

impl Message {
    /// The link after `previous`: BLAKE3 of the previous link and this message's fields (each
    /// length-prefixed, so distinct conversations never hash alike; calls as JSON with sorted
    /// keys; the text hashed as it is, never re-encoded).
    fn link(&self, previous: &Digest) -> Digest {
        PREIMAGE.with_borrow_mut(|buf| {
            buf.clear();
            buf.extend_from_slice(&previous.0);
            buf.push(match self.role {
                Role::User => b'u',
                Role::Assistant => b'a',
                Role::Tool => b't',
                Role::Context => b'c',
            });
            buf.push(u8::from(self.is_error));
            put_sized(buf, self.text.as_bytes());
            put_calls(buf, &self.calls);
            put_sized(buf, self.call_id.as_deref().unwrap_or_default().as_bytes());
            // Tagged and length-prefixed after the rest, so a message without blocks links as
            // it always has.
            if !self.reasoning.is_empty() {
                buf.push(b'r');
                put_json(buf, &self.reasoning);
            }
            // Attachments likewise, by their hashes.
            for attachment in &self.attachments {
                buf.push(b'i');
                buf.extend_from_slice(attachment.sha256.as_bytes());
            }
            let link = Digest(*blake3::hash(buf).as_bytes());
            // A huge message (a pasted file) does not keep its buffer alive for the thread.
            if buf.capacity() > 1 << 16 {
                *buf = Vec::new();
            }
            link
        })
    }
}

/// Appends `bytes` after their length (8 bytes, little-endian).
fn put_sized(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// Appends the JSON of `calls` after its length; nothing but the zero length for no calls.
fn put_calls(buf: &mut Vec<u8>, calls: &[crate::model::ToolCall]) {
    let at = buf.len();
    buf.extend_from_slice(&[0; 8]);
    if !calls.is_empty() {
        crate::model::ToolCall::write_json(calls, buf);
    }
    let len = (buf.len() - at - 8) as u64;
    buf[at..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// Appends the JSON of `items` after its length; nothing but the zero length for no items.
fn put_json<T: Serialize>(buf: &mut Vec<u8>, items: &[T]) {
    let at = buf.len();
    buf.extend_from_slice(&[0; 8]);
    if !items.is_empty() {
        // Writing into a Vec cannot fail, and the items are plain JSON data.
        let _ = serde_json::to_writer(&mut *buf, items);
    }
    let len = (buf.len() - at - 8) as u64;
    buf[at..at + 8].copy_from_slice(&len.to_le_bytes());
}

thread_local! {
    /// The bytes a message's link hashes: one buffer per thread, reused, so linking allocates
    /// nothing.
    static PREIMAGE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
/// A tool call that started and has not finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCall {
    /// The tool.
    pub tool: SharedText,
    /// The `call_started` record's sequence number.
    pub seq: u64,
    /// The input it started with (after any rewrite), shared with the record.
    pub input: Arc<Value>,
}

/// A call its tool parked, and what woke it (once something did).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedCall {
    /// The question, when it waits for an answer.
    pub question: Option<String>,
    /// The children it spawned.
    pub children: Vec<SpawnOrder>,
    /// What woke it.
    pub wake: Option<Wake>,
    /// Whether its `resume` started.
    #[serde(default)]
    pub resuming: bool,
    /// Children the call spawned in earlier parks (a call may park again when it resumes).
    #[serde(default)]
    pub earlier_children: usize,
}

/// Where the current turn stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TurnState {
    /// No user message is waiting.
    #[default]
    Idle,
    /// A user message arrived and the turn has not ended.
    Running,
    /// The turn ended.
    Ended {
        /// Why.
        reason: String,
    },
    /// The turn failed.
    Failed {
        /// Why.
        reason: String,
    },
    /// The turn waits for a person's answer about a call.
    Parked {
        /// The call.
        call_id: String,
        /// What is asked.
        question: String,
    },
}

/// The kernel's part of a task's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreState {
    /// The agent the task runs.
    pub agent: Option<String>,
    /// The parent task, for a child.
    pub parent: Option<String>,
    /// How far below the root task this one is.
    pub depth: u32,
    /// What the parent's extensions handed this task, by extension name.
    pub inherited: BTreeMap<String, Value>,
    /// What the host that made the task kept with it (its model), when it kept anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Value>,
    /// Calls parked by their tools, by call id.
    pub parked: BTreeMap<String, ParkedCall>,
    /// Background children whose results were not delivered yet, in the order they started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<crate::records::SpawnOrder>,
    /// The pinned identity hash.
    pub identity: Option<String>,
    /// The pinned plugins.
    pub pins: Vec<PluginPin>,
    /// The conversation; shared with composed requests, copied only when a request still holds it.
    pub messages: Arc<Vec<Message>>,
    /// The hash chain through the last message (the default digest for an empty conversation).
    pub chain: Digest,
    /// Calls that started and have not finished, by call id.
    pub open_calls: BTreeMap<SharedText, OpenCall>,
    /// The current turn.
    pub turn: TurnState,
    /// Turns failed in a row.
    pub failed_turns: u32,
    /// Why the task failed for good, if it did.
    pub task_failed: Option<String>,
    /// Model calls made.
    pub model_calls: u64,
    /// Tool calls finished.
    pub tool_calls: u64,
    /// Token usage so far (`cost_micros`: the cost of the calls that had a price).
    pub usage: Usage,
    /// Model calls whose provider gave no price.
    #[serde(default)]
    pub unpriced_calls: u64,
    /// Why the model stopped in its last reply.
    pub last_stop: Option<StopReason>,
    /// The index in `messages` of the newest user message.
    pub last_user: Option<usize>,
    /// How many of `messages` are the assistant's: kept as messages come and go, so a step
    /// never counts them (not in snapshots: recounted when one is restored).
    #[serde(skip)]
    pub assistant_messages: u64,
    /// The indexes in `messages` of the messages with attachments, kept the same way.
    #[serde(skip)]
    pub attached: Vec<usize>,
    /// The user message whose turn-intake hooks have run.
    pub intake_seq: u64,
    /// Answers to asks, by call id.
    pub answers: BTreeMap<String, bool>,
}

impl CoreState {
    fn push(&mut self, mut message: Message) {
        message.hash = message.link(&self.chain);
        self.chain = message.hash;
        if message.role == Role::Assistant {
            self.assistant_messages += 1;
        }
        if !message.attachments.is_empty() {
            self.attached.push(self.messages.len());
        }
        Arc::make_mut(&mut self.messages).push(message);
    }

    /// Recomputes every link (after an erasure, or a conversation brought in by a fork).
    fn rechain(&mut self) {
        let mut chain = Digest::default();
        for message in Arc::make_mut(&mut self.messages).iter_mut() {
            message.hash = message.link(&chain);
            chain = message.hash;
        }
        self.chain = chain;
        self.recount();
    }

    /// Recounts what is kept about `messages` as they change (after they were replaced).
    fn recount(&mut self) {
        self.assistant_messages = self
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count() as u64;
        self.attached = attached_of(&self.messages);
    }
}

/// The indexes of the messages with attachments.
pub(crate) fn attached_of(messages: &[Message]) -> Vec<usize> {
    (messages.iter().enumerate())
        .filter(|(_, m)| !m.attachments.is_empty())
        .map(|(i, _)| i)
        .collect()
}

/// Extends a hash chain by one message hash.
pub fn chain_hash(chain: &Digest, next: &Digest) -> Digest {
    Digest::blake3(&[&chain.0, &next.0])
}

/// A task's folded state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// The last sequence number folded in.
    pub seq: u64,
    /// The kernel's state.
    pub core: CoreState,
    /// Each extension's state, by name.
    pub ext: BTreeMap<String, Value>,
}

impl TaskState {
    /// The canonical bytes of the whole state (for byte-equality checks and hashes).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        serde_json::to_value(self)
            .map(|v| canonical::to_bytes(&v))
            .unwrap_or_default()
    }

    /// One extension's folded state.
    pub fn ext_state(&self, name: &str) -> Option<&Value> {
        self.ext.get(name)
    }
}

/// A fold that cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FoldError {
    /// An extension's `reduce` failed or panicked.
    #[error("extension `{extension}` failed to fold record `{kind}` at seq {seq}: {reason}")]
    Reduce {
        /// The extension.
        extension: String,
        /// The record kind.
        kind: String,
        /// The event's sequence number.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// A `core` record's payload does not match its kind.
    #[error("core record `{kind}` at seq {seq} is malformed: {reason}")]
    Core {
        /// The record kind.
        kind: String,
        /// The event's sequence number.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// Events arrived out of order.
    #[error("event seq {seq} cannot follow seq {after}")]
    Gap {
        /// The event's sequence number.
        seq: u64,
        /// The state's last sequence number.
        after: u64,
    },
}

/// The version of the fold's own state layout and hashing; part of every snapshot's tag.
pub const FOLD_FORMAT: &str = "fold-4";

/// What the fold needs of an extension: its name, the other extensions whose records it
/// folds, and its reducer. The fold owns this trait so it depends on nothing above it; the
/// dispatcher (`hooks.rs`) implements it for every extension, guarding each reducer against
/// panics, and makes folders over extension lists ([`Folder::new`]).
pub trait Reducer: Send + Sync {
    /// The extension's name (its records' `extension`, and its state's key).
    fn name(&self) -> &str;

    /// The other extensions whose records it folds too.
    fn folds(&self) -> Vec<String>;

    /// Folds one record into the extension's state; the error says why it cannot.
    ///
    /// # Errors
    /// The reducer's, or its panic as text.
    fn reduce(&self, slot: &mut Value, kind: &str, data: &Value) -> Result<(), String>;
}

/// Folds events for one set of extensions.
#[derive(Clone)]
pub struct Folder {
    reducers: Vec<Arc<dyn Reducer>>,
    /// Record extension name → the extensions that fold it.
    routes: BTreeMap<String, Vec<usize>>,
    /// The extensions that fold `core` records, looked up once rather than per record.
    core_routes: Option<Vec<usize>>,
    plugin_set: String,
}

impl std::fmt::Debug for Folder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Folder")
            .field("routes", &self.routes)
            .field("plugin_set", &self.plugin_set)
            .finish_non_exhaustive()
    }
}

impl Folder {
    /// A folder for `reducers` (an extension list's: see [`Folder::new`]); `plugin_set`
    /// identifies the plugin set for snapshots (tagged with [`FOLD_FORMAT`] too, so a kernel
    /// that folds differently ignores older snapshots).
    pub fn of_reducers(reducers: Vec<Arc<dyn Reducer>>, plugin_set: impl Into<String>) -> Self {
        let mut routes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, ext) in reducers.iter().enumerate() {
            // The kernel folds its own `core` records itself; its session entry has no reduce.
            if ext.name() == CORE {
                continue;
            }
            let mut names: BTreeSet<String> = ext.folds().into_iter().collect();
            names.insert(ext.name().to_owned());
            for name in names {
                routes.entry(name).or_default().push(i);
            }
        }
        Self {
            reducers,
            core_routes: routes.get(CORE).cloned(),
            routes,
            plugin_set: format!("{FOLD_FORMAT}:{}", plugin_set.into()),
        }
    }

    /// The same folder over other reducers, with this folder's plugin-set tag.
    pub fn with_reducers(&self, reducers: Vec<Arc<dyn Reducer>>) -> Self {
        let mut folder = Self::of_reducers(reducers, "");
        folder.plugin_set.clone_from(&self.plugin_set);
        folder
    }

    /// The plugin-set hash snapshots are tagged with.
    pub fn plugin_set(&self) -> &str {
        &self.plugin_set
    }

    /// Folds a whole log from scratch.
    pub fn fold(&self, events: &[Event]) -> Result<TaskState, FoldError> {
        let mut state = TaskState::default();
        // About one message in two events (a reply and a result per call and its start):
        // growing once up front saves the copies of growing step by step.
        Arc::make_mut(&mut state.core.messages).reserve(events.len() / 2);
        for event in events {
            self.apply(&mut state, event)?;
        }
        Ok(state)
    }

    /// The state a snapshot holds, when it was made under this plugin set and still parses;
    /// `None` means fold from scratch.
    pub fn restore(&self, snapshot: Option<&Snapshot>) -> Option<TaskState> {
        snapshot
            .filter(|s| s.plugin_set == self.plugin_set)
            .and_then(|s| serde_json::from_str::<TaskState>(&s.state).ok())
            .filter(|state| Some(state.seq) == snapshot.map(|s| s.seq))
            .map(|mut state| {
                state.core.recount();
                state
            })
    }

    /// Folds the events after `state.seq` onto `state`.
    pub fn fold_onto(
        &self,
        mut state: TaskState,
        events: &[Event],
    ) -> Result<TaskState, FoldError> {
        let from = state.seq;
        for event in events.iter().filter(|e| e.seq > from) {
            self.apply(&mut state, event)?;
        }
        Ok(state)
    }

    /// Starts from a usable snapshot (else from scratch) and folds `tail`, which must hold every
    /// event after the snapshot (or the whole log when the snapshot is not usable).
    pub fn fold_from(
        &self,
        snapshot: Option<&Snapshot>,
        tail: &[Event],
    ) -> Result<TaskState, FoldError> {
        self.fold_onto(self.restore(snapshot).unwrap_or_default(), tail)
    }

    /// A snapshot of `state` under this plugin set.
    pub fn snapshot(&self, state: &TaskState) -> Snapshot {
        Snapshot {
            seq: state.seq,
            plugin_set: self.plugin_set.clone(),
            state: serde_json::to_string(state).unwrap_or_default(),
        }
    }

    /// Applies one event.
    pub fn apply(&self, state: &mut TaskState, event: &Event) -> Result<(), FoldError> {
        if event.seq != state.seq + 1 {
            return Err(FoldError::Gap {
                seq: event.seq,
                after: state.seq,
            });
        }
        let record = &event.record;
        let mut erased = None;
        // A record the kernel made keeps its typed form; one read from a store is decoded here,
        // except the kinds the fold does not read.
        let decoded;
        let core = match CoreRecord::kept(record) {
            Some(typed) => Some(typed),
            None if record.extension == CORE
                && !matches!(record.kind.as_str(), "request_composed" | "note") =>
            {
                decoded =
                    CoreRecord::from_record(record)
                        .transpose()
                        .map_err(|err| FoldError::Core {
                            kind: record.kind.clone(),
                            seq: event.seq,
                            reason: err.to_string(),
                        })?;
                decoded.as_ref()
            }
            None => None,
        };
        if let Some(core) = core {
            erased = fold_core(&mut state.core, event.seq, core);
            if let CoreRecord::Continued { states, .. } = core {
                for (name, value) in states {
                    state.ext.insert(name.clone(), value.clone());
                }
            }
        }
        if let Some(text) = &record.message {
            state.core.push(Message::new(
                event.seq,
                Role::Context,
                SharedText::from(text),
                Arc::default(),
                None,
                false,
            ));
        }
        if let Some(seq) = erased {
            let data = json!({ "seq": seq });
            for i in 0..self.reducers.len() {
                if self.reducers[i].name() != CORE {
                    self.reduce(state, i, ERASED_KIND, &data, event.seq)?;
                }
            }
        } else if let Some(indices) = if core.is_some() {
            self.core_routes.as_deref()
        } else {
            self.routes.get(&record.extension).map(Vec::as_slice)
        } {
            for &i in indices {
                self.reduce(state, i, &record.kind, &record.data, event.seq)?;
            }
        }
        state.seq = event.seq;
        Ok(())
    }

    fn reduce(
        &self,
        state: &mut TaskState,
        index: usize,
        kind: &str,
        data: &Value,
        seq: u64,
    ) -> Result<(), FoldError> {
        let ext = &self.reducers[index];
        if !state.ext.contains_key(ext.name()) {
            state.ext.insert(ext.name().to_owned(), Value::Null);
        }
        let Some(slot) = state.ext.get_mut(ext.name()) else {
            return Ok(());
        };
        ext.reduce(slot, kind, data)
            .map_err(|reason| FoldError::Reduce {
                extension: ext.name().to_owned(),
                kind: kind.to_owned(),
                seq,
                reason,
            })
    }
}

/// After a wake: the turn waits on the next parked call nothing has woken yet (several calls
/// of one reply may park), else it runs.
fn next_waiting(parked: &BTreeMap<String, ParkedCall>) -> TurnState {
    parked
        .iter()
        .find(|(_, p)| p.wake.is_none())
        .map_or(TurnState::Running, |(call_id, p)| TurnState::Parked {
            call_id: call_id.clone(),
            question: p
                .question
                .clone()
                .unwrap_or_else(|| format!("waiting for {} child task(s)", p.children.len())),
        })
}

/// The hash chain through `messages`, link by link (as the fold builds it).
pub fn chain_of(messages: &[Message]) -> Digest {
    messages
        .iter()
        .fold(Digest::default(), |chain, m| m.link(&chain))
}

/// Folds one `core` record; returns the erased sequence number for an erasure. Only what the
/// state keeps is copied out of the record.
fn fold_core(core: &mut CoreState, seq: u64, record: &CoreRecord) -> Option<u64> {
    match record {
        CoreRecord::TaskStarted {
            agent,
            parent,
            depth,
            inherited,
            host,
        } => {
            core.agent = Some(agent.clone());
            core.parent.clone_from(parent);
            core.depth = *depth;
            core.inherited.clone_from(inherited);
            core.host.clone_from(host);
        }
        CoreRecord::ToolParked {
            call_id,
            question,
            children,
        } => {
            let asked = question
                .clone()
                .unwrap_or_else(|| format!("waiting for {} child task(s)", children.len()));
            let earlier_children = core
                .parked
                .get(call_id)
                .map_or(0, |p| p.earlier_children + p.children.len());
            core.parked.insert(
                call_id.clone(),
                ParkedCall {
                    question: question.clone(),
                    children: children.clone(),
                    wake: None,
                    resuming: false,
                    earlier_children,
                },
            );
            core.turn = TurnState::Parked {
                call_id: call_id.clone(),
                question: asked,
            };
        }
        CoreRecord::CallAnswered { call_id, answer } => {
            if let Some(parked) = core.parked.get_mut(call_id) {
                parked.wake = Some(Wake::Answer {
                    answer: answer.clone(),
                });
                core.turn = next_waiting(&core.parked);
            }
        }
        CoreRecord::BackgroundStarted { children, .. } => {
            core.background.extend(children.iter().cloned());
        }
        CoreRecord::BackgroundDelivered { result } => {
            core.background.retain(|order| order.child != result.task);
            // The result (the record's message) is news for the model: it takes a turn on it.
            if !matches!(core.turn, TurnState::Running | TurnState::Parked { .. }) {
                core.turn = TurnState::Running;
            }
        }
        CoreRecord::ChildrenFinished { call_id, results } => {
            if let Some(parked) = core.parked.get_mut(call_id) {
                parked.wake = Some(Wake::Children {
                    results: results.clone(),
                });
                core.turn = next_waiting(&core.parked);
            }
        }
        CoreRecord::Continued { messages, .. } => {
            // The extensions' states are set by `Folder::apply`, which owns them. The copied
            // messages take this record's sequence number: they are this task's from here on.
            let messages = messages
                .iter()
                .map(|m| Message { seq, ..m.clone() })
                .collect();
            core.messages = Arc::new(messages);
            core.rechain();
            core.last_user = core.messages.iter().rposition(|m| m.role == Role::User);
        }
        CoreRecord::ResumeStarted { call_id } => {
            if let Some(parked) = core.parked.get_mut(call_id) {
                parked.resuming = true;
            }
        }
        CoreRecord::FoldFailed { .. }
        | CoreRecord::ClaimRefused { .. }
        | CoreRecord::Note { .. }
        | CoreRecord::RequestComposed { .. } => {}
        CoreRecord::PluginsPinned { identity, pins } => {
            core.identity = Some(identity.clone());
            core.pins.clone_from(pins);
        }
        CoreRecord::UserMessage { text } => {
            core.last_user = Some(core.messages.len());
            core.push(Message::new(
                seq,
                Role::User,
                text.clone(),
                Arc::default(),
                None,
                false,
            ));
            core.turn = TurnState::Running;
        }
        CoreRecord::AssistantReply {
            text,
            calls,
            usage,
            stop,
            reasoning,
        } => {
            core.last_stop = Some(*stop);
            core.model_calls += 1;
            core.usage.input_tokens += usage.input_tokens;
            core.usage.output_tokens += usage.output_tokens;
            core.usage.cache_read_tokens += usage.cache_read_tokens;
            core.usage.cache_write_tokens += usage.cache_write_tokens;
            match usage.cost_micros {
                Some(cost) => {
                    core.usage.cost_micros = Some(core.usage.cost_micros.unwrap_or(0) + cost);
                }
                None => core.unpriced_calls += 1,
            }
            let mut message = Message::new(
                seq,
                Role::Assistant,
                text.clone(),
                calls.clone(),
                None,
                false,
            );
            message.reasoning.clone_from(reasoning);
            core.push(message);
        }
        CoreRecord::CallStarted {
            call_id,
            tool,
            input,
        } => {
            core.open_calls.insert(
                call_id.clone(),
                OpenCall {
                    tool: tool.clone(),
                    seq,
                    input: input.clone(),
                },
            );
        }
        CoreRecord::IntakeDone { seq } => core.intake_seq = *seq,
        CoreRecord::CallParked { call_id, question } => {
            core.turn = TurnState::Parked {
                call_id: call_id.clone(),
                question: question.clone(),
            };
        }
        CoreRecord::AskAnswered { call_id, allow } => {
            core.answers.insert(call_id.clone(), *allow);
            if matches!(core.turn, TurnState::Parked { .. }) {
                core.turn = TurnState::Running;
            }
        }
        CoreRecord::CallFinished {
            call_id,
            text,
            outcome,
            attachments,
            ..
        } => {
            core.open_calls.remove(call_id.as_str());
            core.parked.remove(call_id.as_str());
            core.answers.remove(call_id.as_str());
            let call_id = call_id.clone();
            core.tool_calls += 1;
            let is_error = *outcome != CallOutcome::Ok;
            let mut message = Message::new(
                seq,
                Role::Tool,
                text.clone(),
                Arc::default(),
                Some(call_id),
                is_error,
            );
            message.attachments.clone_from(attachments);
            core.push(message);
        }
        CoreRecord::TurnEnded { reason } => {
            core.turn = TurnState::Ended {
                reason: reason.clone(),
            };
            core.failed_turns = 0;
        }
        CoreRecord::TurnFailed { reason } => {
            core.turn = TurnState::Failed {
                reason: reason.clone(),
            };
            core.failed_turns += 1;
        }
        CoreRecord::TaskFailed { reason } => core.task_failed = Some(reason.clone()),
        CoreRecord::Erased { seq: erased } => {
            Arc::make_mut(&mut core.messages)
                .retain(|m| !(m.seq == *erased && m.role == Role::User));
            core.rechain();
            core.last_user = core.messages.iter().rposition(|m| m.role == Role::User);
            return Some(*erased);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;
    use crate::store::ContentRef;

    /// The link's bytes, spelled out part by part as the format documents them.
    fn spelled_out(message: &Message, previous: &Digest) -> Digest {
        let sized = |bytes: &[u8]| [&(bytes.len() as u64).to_le_bytes()[..], bytes].concat();
        let calls = if message.calls.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&message.calls).unwrap()
        };
        let mut bytes = previous.0.to_vec();
        bytes.push(b'a');
        bytes.push(u8::from(message.is_error));
        bytes.extend(sized(message.text.as_bytes()));
        bytes.extend(sized(&calls));
        bytes.extend(sized(message.call_id.as_deref().unwrap_or("").as_bytes()));
        bytes.push(b'r');
        bytes.extend(sized(&serde_json::to_vec(&message.reasoning).unwrap()));
        for attachment in &message.attachments {
            bytes.push(b'i');
            bytes.extend_from_slice(attachment.sha256.as_bytes());
        }
        Digest(*blake3::hash(&bytes).as_bytes())
    }

    #[test]
    fn a_link_hashes_each_field_length_prefixed_in_order() {
        let mut message = Message::new(
            7,
            Role::Assistant,
            "héllo".into(),
            vec![ToolCall {
                id: "c1".into(),
                name: "Read".into(),
                input: json!({"path": "a\"b", "n": 1}),
            }]
            .into(),
            Some("c0".into()),
            true,
        );
        message.reasoning = vec![json!({"type": "thinking", "thinking": "…"})];
        message.attachments = vec![ContentRef {
            sha256: "cd".repeat(32),
            len: 1,
            media_type: "image/png".into(),
        }];
        let previous = Digest([9; 32]);
        assert_eq!(message.link(&previous), spelled_out(&message, &previous));

        // A message too large for the reused buffer to be kept links the same way, and the
        // next small one after it still links correctly.
        message.text = "x".repeat(200_000).into();
        assert_eq!(message.link(&previous), spelled_out(&message, &previous));
        message.text = "short".into();
        assert_eq!(message.link(&previous), spelled_out(&message, &previous));
    }
}
