//! Stores: one append-only, lease-fenced event stream per task, and a content-addressed store for bodies.
//!
//! The traits are small so that every backend can pass the same contract
//! suite in [`contract`]; the in-memory backend here is the reference, and
//! persistent backends arrive as crates of their own. An append is a batch: all of it is written, or none of it.
//! An append under a lease that is no longer the task's live lease is refused
//! and writes nothing, which is what lets any worker pick up any task.

pub mod contract;
mod memory;
mod queue;
mod queue_contract;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use memory::{MemoryContentStore, MemoryEventLog};
pub use queue::{QueueDepth, Queued, TaskQueue, WorkerSeen};

use crate::canonical;

/// The largest serialised size of one record's payload and message, in bytes; larger bodies
/// go to the content store.
pub const MAX_RECORD_BYTES: usize = 4096;

/// Milliseconds since the Unix epoch, from an injectable source.
pub trait Clock: Send + Sync {
    /// The current time in milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock tests move by hand.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `ms`.
    pub fn at(ms: u64) -> Arc<Self> {
        Arc::new(Self(AtomicU64::new(ms)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A task's id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// A task id; letters, digits, `-`, `_`, `.` and `:` only, 1 to 128 characters.
    pub fn new(id: impl Into<String>) -> Result<Self, StoreError> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 128
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        if ok {
            Ok(Self(id))
        } else {
            Err(StoreError::BadTaskId { id })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of a task's log: something an extension (or the kernel, as `core`) recorded.
///
/// `data` is the record's payload and the only thing stored. A record may also carry, beside
/// it, the typed value its payload was made from (an opaque cache the store never looks into:
/// the kernel keeps its own record types there, so folding a record the runtime wrote itself
/// decodes nothing). The cache is never serialised, and equality and `Debug` ignore it. Such a
/// record's `data` is not to be changed afterwards.
#[derive(Clone, Serialize, Deserialize)]
pub struct Record {
    /// The recording extension; the kernel records as `core`.
    pub extension: String,
    /// The record kind, owned by that extension.
    pub kind: String,
    /// The payload (small; bodies go to the content store and are referenced).
    pub data: Value,
    /// Text that enters the conversation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The typed value `data` was made from, when its maker kept it.
    #[serde(skip)]
    typed: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.extension == other.extension
            && self.kind == other.kind
            && self.data == other.data
            && self.message == other.message
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("extension", &self.extension)
            .field("kind", &self.kind)
            .field("data", &self.data)
            .field("message", &self.message)
            .finish()
    }
}

impl Record {
    /// A record of `extension`/`kind` with `data` and no message.
    pub fn new(extension: impl Into<String>, kind: impl Into<String>, data: Value) -> Self {
        Self {
            extension: extension.into(),
            kind: kind.into(),
            data,
            message: None,
            typed: None,
        }
    }

    /// A record of `extension`/`kind` whose `data` was made from `typed`, which it keeps.
    pub(crate) fn with_typed(
        extension: impl Into<String>,
        kind: String,
        data: Value,
        typed: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        Self {
            typed: Some(typed),
            ..Self::new(extension, kind, data)
        }
    }

    /// The typed value `data` was made from, when its maker kept it.
    pub(crate) fn typed_cache(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.typed.as_deref()
    }

    /// Adds a message that enters the conversation.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Whether the payload and message fit in `limit` serialised bytes: told by a bound made
    /// without serialising (enough for nearly every record), else by [`payload_size`](Self::payload_size).
    pub fn payload_within(&self, limit: usize) -> bool {
        let message = self.message.as_ref().map_or(0, String::len);
        json_bound(&self.data).saturating_add(message) <= limit || self.payload_size() <= limit
    }

    /// The serialised size of the payload plus the message, which [`MAX_RECORD_BYTES`] bounds.
    pub fn payload_size(&self) -> usize {
        /// Counts what would be written, keeping none of it.
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0 += bytes.len();
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        let data = serde_json::to_writer(&mut count, &self.data).map_or(usize::MAX, |()| count.0);
        data.saturating_add(self.message.as_ref().map_or(0, String::len))
    }
}

/// At least as many bytes as `value` takes as compact JSON: a string counts five more for each
/// byte that may be escaped (`\u001f` is six for one), a number 24 (the longest a float
/// prints).
fn json_bound(value: &Value) -> usize {
    fn text(s: &str) -> usize {
        let escaped = s
            .bytes()
            .filter(|&b| b < 0x20 || b == b'"' || b == b'\\')
            .count();
        s.len() + 2 + escaped * 5
    }
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => text(s),
        Value::Array(items) => items
            .iter()
            .fold(2 + items.len(), |n, v| n.saturating_add(json_bound(v))),
        Value::Object(map) => map.iter().fold(2 + 2 * map.len(), |n, (k, v)| {
            n.saturating_add(text(k)).saturating_add(json_bound(v))
        }),
    }
}

/// A record at its place in the log. The record is shared, so reading a log copies no payloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The sequence number, from 1, without gaps.
    pub seq: u64,
    /// The record.
    pub record: Arc<Record>,
}

impl Event {
    /// The event at `seq` holding `record`.
    pub fn new(seq: u64, record: Record) -> Self {
        Self {
            seq,
            record: Arc::new(record),
        }
    }
}

/// The right to append to one task, until it expires or another claim supersedes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The task.
    pub task: TaskId,
    /// Who holds it.
    pub worker: String,
    /// Increases with every claim; appends must carry the live epoch.
    pub epoch: u64,
    /// When it lapses unless renewed.
    pub expires_ms: u64,
}

/// What a store knows about a task without reading its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The task.
    pub id: TaskId,
    /// Its parent, for child tasks.
    pub parent: Option<TaskId>,
    /// The last sequence number (0 for an empty log).
    pub head: u64,
    /// When it was created.
    pub created_ms: u64,
}

/// A fold of a task's log up to `seq`, written off the step path to speed up loading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The last sequence number folded in.
    pub seq: u64,
    /// A hash of the plugin set that folded it; a different set ignores the snapshot.
    pub plugin_set: String,
    /// The folded state as JSON text (parsed straight into the state when it is restored,
    /// never through a JSON tree: a long task's state is megabytes).
    pub state: String,
}

/// A body in the content store, addressed by its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ContentRef {
    /// SHA-256 hex of the body.
    pub sha256: String,
    /// The body's length in bytes.
    pub len: u64,
    /// Its media type.
    pub media_type: String,
}

/// Errors from stores. The runner matches on the kind to decide what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A task id is malformed.
    #[error("task id `{id}` is not valid — use 1 to 128 letters, digits, `-`, `_`, `.` or `:`")]
    BadTaskId {
        /// The rejected id.
        id: String,
    },
    /// No such task.
    #[error("unknown task `{task}`")]
    UnknownTask {
        /// The task.
        task: TaskId,
    },
    /// The task already exists.
    #[error("task `{task}` already exists")]
    TaskExists {
        /// The task.
        task: TaskId,
    },
    /// Another worker holds a live lease.
    #[error("task `{task}` is leased by `{holder}` until {until_ms}")]
    Leased {
        /// The task.
        task: TaskId,
        /// The holder.
        holder: String,
        /// When its lease lapses.
        until_ms: u64,
    },
    /// The lease is no longer the task's live lease; nothing was written.
    #[error(
        "lease epoch {epoch} on task `{task}` is stale (live epoch {live}, or lapsed) — nothing was written"
    )]
    StaleLease {
        /// The task.
        task: TaskId,
        /// The lease's epoch.
        epoch: u64,
        /// The live epoch.
        live: u64,
        /// The worker that claimed the task after this lease's holder, when one did (`None`:
        /// the lease lapsed or was released and nobody has claimed the task since).
        holder: Option<String>,
    },
    /// A record's payload is over [`MAX_RECORD_BYTES`].
    #[error(
        "record `{extension}`/`{kind}` has a {size}-byte payload, over the {MAX_RECORD_BYTES}-byte limit — put large bodies in the content store and record the ref"
    )]
    RecordTooLarge {
        /// The recording extension.
        extension: String,
        /// The record kind.
        kind: String,
        /// Its payload size.
        size: usize,
    },
    /// A content ref names no stored body.
    #[error("no content stored under sha256 {sha256}")]
    MissingContent {
        /// The missing hash.
        sha256: String,
    },
    /// The backend failed.
    #[error("store backend failed: {message}")]
    Backend {
        /// What failed.
        message: String,
    },
}

/// One append-only, lease-fenced event stream per task.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Creates an empty task, optionally as the child of `parent`.
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError>;

    /// Claims the task for `worker` for `ttl_ms`. A live lease of another worker refuses the claim;
    /// every successful claim starts a new epoch.
    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError>;

    /// Claims the task for `worker` from `holder`, even while `holder`'s lease is live: for a
    /// host that knows `holder` is gone (its process ended), so the task need not wait for the
    /// lease to lapse. Refused (`Leased`) when another worker than `holder` holds a live lease;
    /// starts a new epoch like [`claim`](Self::claim), fencing out anything `holder` still
    /// tried to write. The default waits like `claim`.
    async fn take_over(
        &self,
        task: &TaskId,
        worker: &str,
        ttl_ms: u64,
        holder: &str,
    ) -> Result<Lease, StoreError> {
        let _ = holder;
        self.claim(task, worker, ttl_ms).await
    }

    /// Extends a live lease.
    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError>;

    /// Gives a live lease up; a stale one is ignored.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Appends a batch atomically under a live lease; returns the last sequence number written.
    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError>;

    /// [`append`](Self::append) of records already shared — the runner's, which it keeps in
    /// the events it folds — so a store that keeps records as they are keeps them without a
    /// copy. By default, copies them and appends.
    async fn append_shared(&self, lease: &Lease, batch: &[Arc<Record>]) -> Result<u64, StoreError> {
        let owned: Vec<Record> = batch.iter().map(|r| Record::clone(r)).collect();
        self.append(lease, &owned).await
    }

    /// The events with a sequence number greater than `after`, in order.
    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError>;

    /// What the store knows about one task.
    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError>;

    /// Every task, in creation order.
    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError>;

    /// Stores a snapshot (replacing an older one).
    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError>;

    /// The latest snapshot, if any.
    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError>;
}

/// A content-addressed store for bodies.
#[async_trait]
pub trait ContentStore: Send + Sync {
    /// Stores a body (idempotent) and returns its ref.
    async fn put(&self, media_type: &str, body: &[u8]) -> Result<ContentRef, StoreError>;

    /// The body behind a ref.
    async fn get(&self, reference: &ContentRef) -> Result<Vec<u8>, StoreError>;
}

/// The ref a body gets in any content store.
pub fn content_ref(media_type: &str, body: &[u8]) -> ContentRef {
    ContentRef {
        sha256: canonical::sha256_hex(body),
        len: body.len() as u64,
        media_type: media_type.to_owned(),
    }
}

impl ContentRef {
    /// Every content ref a record's data holds, at any depth, in document order: each JSON
    /// object that is exactly a serialised `ContentRef` (`sha256` as 64 lowercase hex digits,
    /// `len`, `media_type`). Store checks use it to find bodies a log refers to.
    pub fn find_in(data: &Value) -> Vec<ContentRef> {
        fn walk(value: &Value, found: &mut Vec<ContentRef>) {
            match value {
                Value::Object(map) => {
                    if map.len() == 3
                        && let Ok(reference) = ContentRef::deserialize(value)
                        && reference.sha256.len() == 64
                        && reference
                            .sha256
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    {
                        found.push(reference);
                        return;
                    }
                    map.values().for_each(|v| walk(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        walk(data, &mut found);
        found
    }
}

/// Checks every record of a batch against [`MAX_RECORD_BYTES`].
pub fn check_batch<'a>(batch: impl IntoIterator<Item = &'a Record>) -> Result<(), StoreError> {
    for record in batch {
        if !record.payload_within(MAX_RECORD_BYTES) {
            within_bound(record, record.payload_size())?;
        }
    }
    Ok(())
}

/// `record`'s data as JSON text, checked against [`MAX_RECORD_BYTES`] with its message: for a
/// store that writes the text, one serialisation does for both.
pub fn checked_json(record: &Record) -> Result<String, StoreError> {
    let data = serde_json::to_string(&record.data).map_err(|e| StoreError::Backend {
        message: format!(
            "record `{}`/`{}` does not serialise: {e}",
            record.extension, record.kind
        ),
    })?;
    within_bound(
        record,
        data.len()
            .saturating_add(record.message.as_ref().map_or(0, String::len)),
    )?;
    Ok(data)
}

/// Refuses a record whose payload is `size` bytes when that is past [`MAX_RECORD_BYTES`].
fn within_bound(record: &Record, size: usize) -> Result<(), StoreError> {
    if size > MAX_RECORD_BYTES {
        return Err(StoreError::RecordTooLarge {
            extension: record.extension.clone(),
            kind: record.kind.clone(),
            size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_bound_is_never_below_the_serialised_size() {
        let values = [
            json!(null),
            json!(true),
            json!(-1.5e-300),
            json!(u64::MAX),
            json!("plain"),
            json!("quotes \" and \\ and \n\t\u{1} and é 𝄞"),
            json!([]),
            json!({}),
            json!({ "a\n": [1, "x", { "b": null }], "": "" }),
            json!("\u{0}".repeat(100)),
        ];
        for value in values {
            let exact = serde_json::to_string(&value).map_or(usize::MAX, |s| s.len());
            assert!(json_bound(&value) >= exact, "{value}");
        }
    }

    #[test]
    fn within_a_limit_is_decided_exactly_near_it() {
        // 700 control bytes are written as 4,202 bytes: over the limit, by bound and exactly.
        let record = Record::new("x", "k", json!("\u{1}".repeat(700)));
        assert!(!record.payload_within(MAX_RECORD_BYTES));
        // Newlines count five more each in the bound (over 4,096) but one more when written.
        let record = Record::new("x", "k", json!("\n".repeat(1_500)));
        assert!(record.payload_within(MAX_RECORD_BYTES));
        assert_eq!(record.payload_size(), 3_002);
    }
}
