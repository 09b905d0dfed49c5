//! The SQLite store: one file holding every task's event log, leases, snapshots and content bodies.
//!
//! Its semantics are the in-memory reference store's (`noeta_core::store::MemoryEventLog`),
//! checked by the kernel's contract suite. Every write runs in a `BEGIN IMMEDIATE`
//! transaction and re-reads the task's lease first, so an append under a stale
//! or lapsed lease is refused and writes nothing, even when another process
//! holds another handle on the same file. Appends and lease renewals of tasks stepping at
//! once share transactions and commits (group commit, `worker.rs`), each after the first in
//! its own savepoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::store::{
    Clock, ContentRef, ContentStore, Event, EventLog, Lease, Record, Snapshot, StoreError, TaskId,
    TaskInfo, checked_json, content_ref,
};
use rusqlite::{
    Connection, ErrorCode, OptionalExtension, Row, Transaction, TransactionBehavior, params,
};
use serde_json::Value;

use crate::error::OpenError;
use crate::schema;
use crate::worker::Worker;

mod queue;

/// An event log and content store in one SQLite database, file-backed or in memory.
///
/// One value implements both [`EventLog`] and [`ContentStore`] over one
/// connection, owned by a dedicated thread: the async methods queue their
/// statements there and await the answer, so they never block the executor
/// and need no particular runtime. Share it as an `Arc` for both roles.
/// Several handles (in one process or several) may open the same file; SQLite's
/// locking serialises their writes and the lease check inside each write
/// transaction fences them.
pub struct SqliteStore {
    clock: Arc<dyn Clock>,
    path: Option<PathBuf>,
    read_only: bool,
    worker: Worker,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Appends rows made from a checked batch under `lease`.
    async fn append_rows(&self, lease: &Lease, rows: Vec<PendingRow>) -> Result<u64, StoreError> {
        let lease = lease.clone();
        self.grouped(move |conn, clock| {
            let row = task_row(conn, &lease.task)?;
            if !row.live(&lease, clock.now_ms()) {
                return Err(row.stale(&lease).into());
            }
            let mut seq = head(conn, row.no)?;
            if rows.is_empty() {
                return Ok(seq);
            }
            {
                let mut insert = conn.prepare_cached(
                    "INSERT INTO events (task_no, seq, extension, kind, data, message)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?;
                for r in &rows {
                    seq += 1;
                    insert.execute(params![
                        row.no,
                        int(seq),
                        r.extension,
                        r.kind,
                        r.data,
                        r.message
                    ])?;
                }
            }
            Ok(seq)
        })
        .await
    }

    /// Opens the store file at `path`, creating it, its parent directories and the schema when
    /// missing. Leases are timed by `clock`.
    ///
    /// A file that is not a noeta store, or was written with a newer schema version, is refused.
    /// An existing store that cannot be written is opened read-only ([`Self::is_read_only`]):
    /// reads work, and every write fails naming the file.
    pub fn open(path: impl AsRef<Path>, clock: Arc<dyn Clock>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let opened = schema::open_file(path)?;
        let mut store = Self::start(opened.conn, Some(path.to_owned()), clock)?;
        store.read_only = opened.read_only;
        Ok(store)
    }

    /// A fresh store held in memory, gone when dropped; for tests and short-lived hosts.
    pub fn in_memory(clock: Arc<dyn Clock>) -> Result<Self, OpenError> {
        let conn = schema::open_memory()?;
        Self::start(conn, None, clock)
    }

    fn start(
        conn: Connection,
        path: Option<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, OpenError> {
        let worker = Worker::spawn(conn, "noeta-sqlite").map_err(|source| OpenError::Thread {
            path: path
                .clone()
                .unwrap_or_else(|| PathBuf::from(schema::MEMORY_NAME)),
            source,
        })?;
        Ok(Self {
            clock,
            path,
            read_only: false,
            worker,
        })
    }

    /// The database file, or `None` for a store in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether the file could only be opened for reading.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Runs `job` on the connection's thread.
    async fn run<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &dyn Clock) -> Result<T, Fail> + Send + 'static,
    {
        let clock = Arc::clone(&self.clock);
        self.worker
            .call(move |conn| Ok(job(conn, clock.as_ref())))
            .await?
            .map_err(|fail| self.store_error(fail))
    }

    /// Runs `job` inside a write transaction it may share with the writes of other tasks (group
    /// commit, see `worker`), answering once that transaction has committed. `job` neither
    /// begins nor commits.
    async fn grouped<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &dyn Clock) -> Result<T, Fail> + Send + 'static,
    {
        let clock = Arc::clone(&self.clock);
        self.worker
            .write(move |conn| job(conn, clock.as_ref()))
            .await?
            .map_err(|fail| self.store_error(fail))
    }

    fn store_error(&self, fail: Fail) -> StoreError {
        let path = self
            .path
            .as_deref()
            .unwrap_or_else(|| Path::new(schema::MEMORY_NAME));
        let name = path.display();
        match fail {
            Fail::Store(err) => err,
            Fail::Sqlite(err)
                if self.read_only && err.sqlite_error_code() == Some(ErrorCode::ReadOnly) =>
            {
                StoreError::Backend {
                    message: format!(
                        "SQLite store `{name}` is open read-only (the file, or its directory, cannot be written): {err}"
                    ),
                }
            }
            Fail::Sqlite(err) if schema::damaged(&err) => StoreError::Backend {
                message: schema::sqlite_error(path, err).to_string(),
            },
            Fail::Sqlite(err) => StoreError::Backend {
                message: format!("SQLite store `{name}`: {err}"),
            },
            Fail::Corrupt(what) => StoreError::Backend {
                message: format!("SQLite store `{name}` holds a corrupt value: {what}"),
            },
        }
    }
}

/// Why a job failed: a contract outcome, an SQLite error, or a stored value that does not decode.
enum Fail {
    Store(StoreError),
    Sqlite(rusqlite::Error),
    Corrupt(String),
}

impl From<StoreError> for Fail {
    fn from(err: StoreError) -> Self {
        Self::Store(err)
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(err: rusqlite::Error) -> Self {
        Self::Sqlite(err)
    }
}

/// A `u64` as the `i64` with the same bits, which is how the schema stores it.
fn int(value: u64) -> i64 {
    value.cast_signed()
}

fn uint(value: i64) -> u64 {
    value.cast_unsigned()
}

fn unknown(task: &TaskId) -> StoreError {
    StoreError::UnknownTask { task: task.clone() }
}

fn task_id(raw: String) -> Result<TaskId, Fail> {
    TaskId::new(raw).map_err(|e| Fail::Corrupt(e.to_string()))
}

fn json(raw: &str, what: impl FnOnce() -> String) -> Result<Value, Fail> {
    serde_json::from_str(raw).map_err(|e| Fail::Corrupt(format!("{} is not JSON: {e}", what())))
}

fn write(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// A task's row: its key, epoch and lease.
struct TaskRow {
    no: i64,
    epoch: u64,
    lease: Option<(String, u64)>,
}

impl TaskRow {
    /// Whether `lease` is the task's live lease at `now`.
    fn live(&self, lease: &Lease, now: u64) -> bool {
        self.epoch == lease.epoch
            && self
                .lease
                .as_ref()
                .is_some_and(|(worker, expires)| *worker == lease.worker && *expires > now)
    }

    fn stale(&self, lease: &Lease) -> StoreError {
        StoreError::StaleLease {
            task: lease.task.clone(),
            epoch: lease.epoch,
            live: self.epoch,
            holder: self
                .lease
                .as_ref()
                .filter(|_| self.epoch != lease.epoch)
                .map(|(worker, _)| worker.clone()),
        }
    }
}

fn task_row(conn: &Connection, task: &TaskId) -> Result<TaskRow, Fail> {
    conn.prepare_cached(
        "SELECT task_no, epoch, lease_worker, lease_expires_ms FROM tasks WHERE id = ?1",
    )?
    .query_row([task.as_str()], |row| {
        let worker: Option<String> = row.get(2)?;
        let expires: Option<i64> = row.get(3)?;
        Ok(TaskRow {
            no: row.get(0)?,
            epoch: uint(row.get(1)?),
            lease: worker.zip(expires.map(uint)),
        })
    })
    .optional()?
    .ok_or_else(|| Fail::Store(unknown(task)))
}

fn task_no(conn: &Connection, task: &TaskId) -> Result<i64, Fail> {
    conn.prepare_cached("SELECT task_no FROM tasks WHERE id = ?1")?
        .query_row([task.as_str()], |row| row.get(0))
        .optional()?
        .ok_or_else(|| Fail::Store(unknown(task)))
}

fn head(conn: &Connection, no: i64) -> Result<u64, Fail> {
    let head: i64 = conn
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM events WHERE task_no = ?1")?
        .query_row([no], |row| row.get(0))?;
    Ok(uint(head))
}

const INFO: &str = "SELECT t.id, p.id, t.created_ms,
        (SELECT coalesce(max(e.seq), 0) FROM events e WHERE e.task_no = t.task_no)
    FROM tasks t LEFT JOIN tasks p ON p.task_no = t.parent_no";

type InfoRow = (String, Option<String>, i64, i64);

fn info_row(row: &Row<'_>) -> rusqlite::Result<InfoRow> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

fn task_info((id, parent, created, head): InfoRow) -> Result<TaskInfo, Fail> {
    Ok(TaskInfo {
        id: task_id(id)?,
        parent: parent.map(task_id).transpose()?,
        head: uint(head),
        created_ms: uint(created),
    })
}

/// The rows of `batch`, each serialised once and checked against the record size bound.
fn pending_rows<'a>(
    batch: impl IntoIterator<Item = &'a Record>,
) -> Result<Vec<PendingRow>, StoreError> {
    batch
        .into_iter()
        .map(|record| {
            Ok(PendingRow {
                extension: record.extension.clone(),
                kind: record.kind.clone(),
                data: checked_json(record)?,
                message: record.message.clone(),
            })
        })
        .collect()
}

/// A record ready for its row: `data` already serialised.
struct PendingRow {
    extension: String,
    kind: String,
    data: String,
    message: Option<String>,
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        let task = task.clone();
        let parent = parent.cloned();
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            let now = clock.now_ms();
            let exists: bool = tx
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1)")?
                .query_row([task.as_str()], |row| row.get(0))?;
            if exists {
                return Err(StoreError::TaskExists { task }.into());
            }
            let parent_no = parent.as_ref().map(|p| task_no(&tx, p)).transpose()?;
            tx.prepare_cached("INSERT INTO tasks (id, parent_no, created_ms) VALUES (?1, ?2, ?3)")?
                .execute(params![task.as_str(), parent_no, int(now)])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn claim(&self, task: &TaskId, worker: &str, ttl_ms: u64) -> Result<Lease, StoreError> {
        self.take_over(task, worker, ttl_ms, worker).await
    }

    async fn take_over(
        &self,
        task: &TaskId,
        worker: &str,
        ttl_ms: u64,
        from: &str,
    ) -> Result<Lease, StoreError> {
        let task = task.clone();
        let worker = worker.to_owned();
        let from = from.to_owned();
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            let row = task_row(&tx, &task)?;
            let now = clock.now_ms();
            if let Some((holder, until_ms)) = row.lease
                && until_ms > now
                && holder != worker
                && holder != from
            {
                return Err(StoreError::Leased {
                    task,
                    holder,
                    until_ms,
                }
                .into());
            }
            let epoch = row.epoch + 1;
            let expires_ms = now.saturating_add(ttl_ms);
            tx.prepare_cached(
                "UPDATE tasks SET epoch = ?1, lease_worker = ?2, lease_expires_ms = ?3 WHERE task_no = ?4",
            )?
            .execute(params![int(epoch), worker, int(expires_ms), row.no])?;
            tx.commit()?;
            Ok(Lease {
                task,
                worker,
                epoch,
                expires_ms,
            })
        })
        .await
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        let lease = lease.clone();
        self.grouped(move |conn, clock| {
            let row = task_row(conn, &lease.task)?;
            let now = clock.now_ms();
            if !row.live(&lease, now) {
                return Err(row.stale(&lease).into());
            }
            let expires_ms = now.saturating_add(ttl_ms);
            conn.prepare_cached("UPDATE tasks SET lease_expires_ms = ?1 WHERE task_no = ?2")?
                .execute(params![int(expires_ms), row.no])?;
            Ok(Lease {
                expires_ms,
                ..lease
            })
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let lease = lease.clone();
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            let row = task_row(&tx, &lease.task)?;
            if row.live(&lease, clock.now_ms()) {
                tx.prepare_cached(
                    "UPDATE tasks SET lease_worker = NULL, lease_expires_ms = NULL WHERE task_no = ?1",
                )?
                .execute([row.no])?;
                tx.commit()?;
            }
            Ok(())
        })
        .await
    }

    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        self.append_rows(lease, pending_rows(batch)?).await
    }

    async fn append_shared(&self, lease: &Lease, batch: &[Arc<Record>]) -> Result<u64, StoreError> {
        self.append_rows(lease, pending_rows(batch.iter().map(AsRef::as_ref))?)
            .await
    }

    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        let task = task.clone();
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        self.run(move |conn, _| {
            let no = task_no(conn, &task)?;
            let mut stmt = conn.prepare_cached(
                "SELECT seq, extension, kind, data, message FROM events
                 WHERE task_no = ?1 AND seq > ?2 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![no, after], |row| {
                Ok((
                    uint(row.get(0)?),
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, Option<String>>(4)?,
                ))
            })?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, extension, kind, data, message) = row?;
                let data = json(&data, || {
                    format!("the data of event {seq} of task `{task}`")
                })?;
                let mut record = Record::new(extension, kind, data);
                record.message = message;
                events.push(Event::new(seq, record));
            }
            Ok(events)
        })
        .await
    }

    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError> {
        let task = task.clone();
        self.run(move |conn, _| {
            let row = conn
                .prepare_cached(&format!("{INFO} WHERE t.id = ?1"))?
                .query_row([task.as_str()], info_row)
                .optional()?
                .ok_or_else(|| unknown(&task))?;
            task_info(row)
        })
        .await
    }

    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError> {
        self.run(|conn, _| {
            let mut stmt = conn.prepare_cached(&format!("{INFO} ORDER BY t.task_no"))?;
            let rows = stmt.query_map([], info_row)?;
            let mut all = Vec::new();
            for row in rows {
                all.push(task_info(row?)?);
            }
            Ok(all)
        })
        .await
    }

    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError> {
        let task = task.clone();
        let seq = snapshot.seq;
        let plugin_set = snapshot.plugin_set.clone();
        let state = snapshot.state.clone();
        self.run(move |conn, _| {
            let tx = write(conn)?;
            let no = task_no(&tx, &task)?;
            let held: Option<i64> = tx
                .prepare_cached("SELECT seq FROM snapshots WHERE task_no = ?1")?
                .query_row([no], |row| row.get(0))
                .optional()?;
            if held.is_none_or(|held| uint(held) <= seq) {
                tx.prepare_cached(
                    "INSERT INTO snapshots (task_no, seq, plugin_set, state) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (task_no) DO UPDATE
                     SET seq = excluded.seq, plugin_set = excluded.plugin_set, state = excluded.state",
                )?
                .execute(params![no, int(seq), plugin_set, state])?;
                tx.commit()?;
            }
            Ok(())
        })
        .await
    }

    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError> {
        let task = task.clone();
        self.run(move |conn, _| {
            let no = task_no(conn, &task)?;
            let row: Option<(i64, String, String)> = conn
                .prepare_cached("SELECT seq, plugin_set, state FROM snapshots WHERE task_no = ?1")?
                .query_row([no], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .optional()?;
            row.map(|(seq, plugin_set, state)| {
                Ok(Snapshot {
                    seq: uint(seq),
                    plugin_set,
                    state,
                })
            })
            .transpose()
        })
        .await
    }
}

#[async_trait]
impl ContentStore for SqliteStore {
    async fn put(&self, media_type: &str, body: &[u8]) -> Result<ContentRef, StoreError> {
        let reference = content_ref(media_type, body);
        let sha256 = reference.sha256.clone();
        let body = body.to_vec();
        self.run(move |conn, _| {
            conn.prepare_cached(
                "INSERT INTO content (sha256, len, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (sha256) DO NOTHING",
            )?
            .execute(params![sha256, int(body.len() as u64), body])?;
            Ok(())
        })
        .await?;
        Ok(reference)
    }

    async fn get(&self, reference: &ContentRef) -> Result<Vec<u8>, StoreError> {
        let sha256 = reference.sha256.clone();
        self.run(move |conn, _| {
            conn.prepare_cached("SELECT body FROM content WHERE sha256 = ?1")?
                .query_row([sha256.as_str()], |row| row.get(0))
                .optional()?
                .ok_or_else(|| StoreError::MissingContent { sha256 }.into())
        })
        .await
    }
}
