//! The PostgreSQL store: every task's event log, leases, snapshots and content bodies in one
//! database, shared by any number of processes on any number of hosts.
//!
//! Its semantics are the in-memory reference store's, checked by the kernel's contract suite.
//! Every write is one transaction that locks the task's row (`SELECT … FOR UPDATE`) and checks
//! the lease there, against the **database's** clock: a worker whose lease lapsed cannot write,
//! whatever its own clock says. (Tests may pass a clock of their own to time leases instead.)
//!
//! The schema is created and migrated by the store itself, under an advisory lock, and
//! versioned; a database written by a newer noeta is refused. The client (tokio-postgres, with
//! a deadpool pool) runs on a runtime thread of the store's own, so the async methods need no
//! particular executor.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use noeta_core::store::{
    Clock, ContentRef, ContentStore, Event, EventLog, Lease, Record, Snapshot, StoreError, TaskId,
    TaskInfo, checked_json, content_ref,
};
use tokio_postgres::{NoTls, Row};

use crate::error::OpenError;

mod queue;

/// The schema version this build writes and reads.
pub const PG_SCHEMA_VERSION: i32 = 2;

/// The advisory lock key under which the schema is created or migrated.
const SCHEMA_LOCK: i64 = 0x6e6f_6574_6100;

/// The schema, version 1. Record data is kept as the JSON text appended (not `jsonb`, which
/// would reorder keys): a log reads back byte for byte.
const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS noeta_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS noeta_tasks (
    task_no bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    parent_no bigint REFERENCES noeta_tasks (task_no),
    created_ms bigint NOT NULL,
    head bigint NOT NULL DEFAULT 0,
    epoch bigint NOT NULL DEFAULT 0,
    lease_worker text,
    lease_expires_ms bigint
);
CREATE TABLE IF NOT EXISTS noeta_events (
    task_no bigint NOT NULL REFERENCES noeta_tasks (task_no),
    seq bigint NOT NULL,
    extension text NOT NULL,
    kind text NOT NULL,
    data text NOT NULL,
    message text,
    PRIMARY KEY (task_no, seq)
);
CREATE TABLE IF NOT EXISTS noeta_snapshots (
    task_no bigint PRIMARY KEY REFERENCES noeta_tasks (task_no),
    seq bigint NOT NULL,
    plugin_set text NOT NULL,
    state text NOT NULL
);
CREATE TABLE IF NOT EXISTS noeta_content (
    sha256 text PRIMARY KEY,
    len bigint NOT NULL,
    body bytea NOT NULL
);
";

/// The database's clock, in milliseconds since the epoch, as SQL.
const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The store's runtime, for the life of the process (never dropped), shared by every store.
fn runtime() -> Result<&'static tokio::runtime::Handle, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("noeta-postgres")
                .enable_all()
                .build()
                .map_err(|err| format!("cannot start the PostgreSQL client's runtime: {err}"))
        })
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
        .map_err(Clone::clone)
}

/// `url` with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// An event log and content store in a PostgreSQL database.
pub struct PgStore {
    pool: Pool,
    name: String,
    clock: Option<Arc<dyn Clock>>,
    /// For the queue's listening connection.
    config: tokio_postgres::Config,
    listener: queue::Listener,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why a job failed: a contract outcome, or the database.
enum Fail {
    Store(StoreError),
    Db(tokio_postgres::Error),
    Pool(String),
}

impl From<StoreError> for Fail {
    fn from(err: StoreError) -> Self {
        Self::Store(err)
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Db(err)
    }
}

fn int(value: u64) -> i64 {
    value.cast_signed()
}

fn uint(value: i64) -> u64 {
    value.cast_unsigned()
}

fn unknown(task: &TaskId) -> StoreError {
    StoreError::UnknownTask { task: task.clone() }
}

/// A batch as the columns of one insert.
struct Columns {
    extensions: Vec<String>,
    kinds: Vec<String>,
    data: Vec<String>,
    messages: Vec<Option<String>>,
}

impl Columns {
    /// Each record serialised once and checked against the record size bound.
    fn of<'a>(batch: impl IntoIterator<Item = &'a Record>) -> Result<Self, StoreError> {
        let mut columns = Self {
            extensions: Vec::new(),
            kinds: Vec::new(),
            data: Vec::new(),
            messages: Vec::new(),
        };
        for record in batch {
            columns.data.push(checked_json(record)?);
            columns.extensions.push(record.extension.clone());
            columns.kinds.push(record.kind.clone());
            columns.messages.push(record.message.clone());
        }
        Ok(columns)
    }
}

impl PgStore {
    /// Appends a checked batch, column by column, under `lease`.
    async fn append_columns(&self, lease: &Lease, columns: Columns) -> Result<u64, StoreError> {
        let lease = lease.clone();
        let Columns {
            extensions,
            kinds,
            data,
            messages,
        } = columns;
        self.run(move |mut client, now| async move {
            let tx = client.transaction().await?;
            let row = lock_task(&tx, &lease.task, now).await?;
            if !row.live(&lease) {
                return Err(row.stale(&lease).into());
            }
            if extensions.is_empty() {
                return Ok(row.head);
            }
            let first = int(row.head + 1);
            let last = row.head + extensions.len() as u64;
            let insert = tx
                .prepare_cached(
                    "INSERT INTO noeta_events (task_no, seq, extension, kind, data, message)
                     SELECT $1, $2 + n - 1, e, k, d, m
                     FROM unnest($3::text[], $4::text[], $5::text[], $6::text[])
                          WITH ORDINALITY AS r(e, k, d, m, n)",
                )
                .await?;
            tx.execute(
                &insert,
                &[&row.no, &first, &extensions, &kinds, &data, &messages],
            )
            .await?;
            let head = tx
                .prepare_cached("UPDATE noeta_tasks SET head = $1 WHERE task_no = $2")
                .await?;
            tx.execute(&head, &[&int(last), &row.no]).await?;
            tx.commit().await?;
            Ok(last)
        })
        .await
    }

    /// Connects to the database at `url` (`postgres://…` or `postgresql://…`), creating or
    /// migrating the schema. Leases are timed by the database's clock, or by `clock` when
    /// given (tests that move time by hand).
    pub fn connect(url: &str, clock: Option<Arc<dyn Clock>>) -> Result<Self, OpenError> {
        let name = redact(url);
        let failed = |reason: String| OpenError::Postgres {
            url: redact(url),
            reason,
        };
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|err: tokio_postgres::Error| failed(err.to_string()))?;
        let handle = runtime().map_err(&failed)?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = {
            let _entered = handle.enter();
            Pool::builder(manager)
                .max_size(16)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(|err| failed(err.to_string()))?
        };
        let store = Self {
            pool,
            name,
            clock,
            config,
            listener: queue::Listener::new(),
        };
        let migrate_pool = store.pool.clone();
        futures::executor::block_on(async {
            handle
                .spawn(async move { migrate(&migrate_pool).await })
                .await
                .map_err(|err| err.to_string())?
        })
        .map_err(failed)?;
        Ok(store)
    }

    /// The URL it was opened with, its password hidden.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `job` with a pooled client on the store's runtime.
    async fn run<T, F, Fut>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object, Option<u64>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, Fail>> + Send + 'static,
    {
        let pool = self.pool.clone();
        let now = self.clock.as_ref().map(|c| c.now_ms());
        let handle = runtime().map_err(|message| StoreError::Backend { message })?;
        let outcome = handle
            .spawn(async move {
                let client = pool.get().await.map_err(|err| Fail::Pool(chain(&err)))?;
                job(client, now).await
            })
            .await
            .map_err(|err| StoreError::Backend {
                message: format!("PostgreSQL store `{}`: {err}", self.name),
            })?;
        outcome.map_err(|fail| match fail {
            Fail::Store(err) => err,
            Fail::Db(err) => StoreError::Backend {
                message: format!("PostgreSQL store `{}`: {}", self.name, db_error(&err)),
            },
            Fail::Pool(err) => StoreError::Backend {
                message: format!("PostgreSQL store `{}`: cannot connect: {err}", self.name),
            },
        })
    }
}

/// An error with its causes ("error connecting to server: Connection refused").
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// A database error with the server's own message when it gave one.
fn db_error(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => chain(err),
    }
}

/// Creates the schema, or checks the one found is one this build reads.
async fn migrate(pool: &Pool) -> Result<(), String> {
    let mut client = pool
        .get()
        .await
        .map_err(|err| format!("cannot connect: {}", chain(&err)))?;
    let tx = client.transaction().await.map_err(|err| db_error(&err))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(|err| db_error(&err))?;
    tx.batch_execute(SCHEMA_V1)
        .await
        .map_err(|err| db_error(&err))?;
    let found: Option<i32> = tx
        .query_opt("SELECT max(version) FROM noeta_schema", &[])
        .await
        .map_err(|err| db_error(&err))?
        .and_then(|row| row.get(0));
    if let Some(version) = found
        && version > PG_SCHEMA_VERSION
    {
        return Err(format!(
            "the database has store schema version {version}, newer than version \
             {PG_SCHEMA_VERSION} that this build reads — use a newer noeta"
        ));
    }
    if found != Some(PG_SCHEMA_VERSION) {
        // New, or version 1 (no queue): version 2 adds the queue's tables.
        tx.batch_execute(queue::SCHEMA_V2)
            .await
            .map_err(|err| db_error(&err))?;
        tx.execute("DELETE FROM noeta_schema", &[])
            .await
            .map_err(|err| db_error(&err))?;
        tx.execute(
            "INSERT INTO noeta_schema (version) VALUES ($1)",
            &[&PG_SCHEMA_VERSION],
        )
        .await
        .map_err(|err| db_error(&err))?;
    }
    tx.commit().await.map_err(|err| db_error(&err))
}

/// A task's row, locked for the transaction: its key, epoch, head, lease, and the time.
struct TaskRow {
    no: i64,
    epoch: u64,
    head: u64,
    lease: Option<(String, u64)>,
    now: u64,
}

impl TaskRow {
    fn live(&self, lease: &Lease) -> bool {
        self.epoch == lease.epoch
            && self
                .lease
                .as_ref()
                .is_some_and(|(worker, expires)| *worker == lease.worker && *expires > self.now)
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

/// Locks `task`'s row in `tx` and reads it; `now` is the test clock's time, if any.
async fn lock_task(
    tx: &deadpool_postgres::Transaction<'_>,
    task: &TaskId,
    now: Option<u64>,
) -> Result<TaskRow, Fail> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT task_no, epoch, head, lease_worker, lease_expires_ms, {DB_NOW}
             FROM noeta_tasks WHERE id = $1 FOR UPDATE"
        ))
        .await?;
    let row = tx
        .query_opt(&stmt, &[&task.as_str()])
        .await?
        .ok_or_else(|| Fail::Store(unknown(task)))?;
    let worker: Option<String> = row.get(3);
    let expires: Option<i64> = row.get(4);
    Ok(TaskRow {
        no: row.get(0),
        epoch: uint(row.get(1)),
        head: uint(row.get(2)),
        lease: worker.zip(expires.map(uint)),
        now: now.unwrap_or_else(|| uint(row.get(5))),
    })
}

async fn task_no(client: &deadpool_postgres::Object, task: &TaskId) -> Result<i64, Fail> {
    let stmt = client
        .prepare_cached("SELECT task_no FROM noeta_tasks WHERE id = $1")
        .await?;
    Ok(client
        .query_opt(&stmt, &[&task.as_str()])
        .await?
        .ok_or_else(|| Fail::Store(unknown(task)))?
        .get(0))
}

const INFO: &str = "SELECT t.id, p.id, t.created_ms, t.head
    FROM noeta_tasks t LEFT JOIN noeta_tasks p ON p.task_no = t.parent_no";

fn task_info(row: &Row) -> Result<TaskInfo, Fail> {
    let corrupt = |err: StoreError| {
        Fail::Store(StoreError::Backend {
            message: format!("a stored task id is not valid: {err}"),
        })
    };
    let parent: Option<String> = row.get(1);
    Ok(TaskInfo {
        id: TaskId::new(row.get::<_, String>(0)).map_err(corrupt)?,
        parent: parent.map(TaskId::new).transpose().map_err(corrupt)?,
        created_ms: uint(row.get(2)),
        head: uint(row.get(3)),
    })
}

/// Claims `task` for `worker` (from `from`, when that worker is known to be gone).
async fn claim(
    mut client: deadpool_postgres::Object,
    now: Option<u64>,
    task: TaskId,
    worker: String,
    ttl_ms: u64,
    from: String,
) -> Result<Lease, Fail> {
    let tx = client.transaction().await?;
    let row = lock_task(&tx, &task, now).await?;
    if let Some((holder, until_ms)) = row.lease
        && until_ms > row.now
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
    let expires_ms = row.now.saturating_add(ttl_ms);
    let stmt = tx
        .prepare_cached(
            "UPDATE noeta_tasks SET epoch = $1, lease_worker = $2, lease_expires_ms = $3
             WHERE task_no = $4",
        )
        .await?;
    tx.execute(&stmt, &[&int(epoch), &worker, &int(expires_ms), &row.no])
        .await?;
    tx.commit().await?;
    Ok(Lease {
        task,
        worker,
        epoch,
        expires_ms,
    })
}

#[async_trait]
impl EventLog for PgStore {
    async fn create_task(&self, task: &TaskId, parent: Option<&TaskId>) -> Result<(), StoreError> {
        let task = task.clone();
        let parent = parent.cloned();
        self.run(move |client, now| async move {
            let parent_no = match &parent {
                Some(p) => Some(task_no(&client, p).await?),
                None => None,
            };
            let stmt = client
                .prepare_cached(&format!(
                    "INSERT INTO noeta_tasks (id, parent_no, created_ms)
                     VALUES ($1, $2, coalesce($3, {DB_NOW}))
                     ON CONFLICT (id) DO NOTHING"
                ))
                .await?;
            let inserted = client
                .execute(&stmt, &[&task.as_str(), &parent_no, &now.map(int)])
                .await?;
            if inserted == 0 {
                return Err(StoreError::TaskExists { task }.into());
            }
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
        let (task, worker, from) = (task.clone(), worker.to_owned(), from.to_owned());
        self.run(move |client, now| claim(client, now, task, worker, ttl_ms, from))
            .await
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StoreError> {
        let lease = lease.clone();
        self.run(move |mut client, now| async move {
            let tx = client.transaction().await?;
            let row = lock_task(&tx, &lease.task, now).await?;
            if !row.live(&lease) {
                return Err(row.stale(&lease).into());
            }
            let expires_ms = row.now.saturating_add(ttl_ms);
            let stmt = tx
                .prepare_cached("UPDATE noeta_tasks SET lease_expires_ms = $1 WHERE task_no = $2")
                .await?;
            tx.execute(&stmt, &[&int(expires_ms), &row.no]).await?;
            tx.commit().await?;
            Ok(Lease {
                expires_ms,
                ..lease
            })
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let lease = lease.clone();
        self.run(move |mut client, now| async move {
            let tx = client.transaction().await?;
            let row = lock_task(&tx, &lease.task, now).await?;
            if row.live(&lease) {
                let stmt = tx
                    .prepare_cached(
                        "UPDATE noeta_tasks SET lease_worker = NULL, lease_expires_ms = NULL
                         WHERE task_no = $1",
                    )
                    .await?;
                tx.execute(&stmt, &[&row.no]).await?;
                tx.commit().await?;
            }
            Ok(())
        })
        .await
    }

    async fn append(&self, lease: &Lease, batch: &[Record]) -> Result<u64, StoreError> {
        self.append_columns(lease, Columns::of(batch)?).await
    }

    async fn append_shared(&self, lease: &Lease, batch: &[Arc<Record>]) -> Result<u64, StoreError> {
        self.append_columns(lease, Columns::of(batch.iter().map(AsRef::as_ref))?)
            .await
    }

    async fn read(&self, task: &TaskId, after: u64) -> Result<Vec<Event>, StoreError> {
        let task = task.clone();
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        self.run(move |client, _| async move {
            let no = task_no(&client, &task).await?;
            let stmt = client
                .prepare_cached(
                    "SELECT seq, extension, kind, data, message FROM noeta_events
                     WHERE task_no = $1 AND seq > $2 ORDER BY seq",
                )
                .await?;
            let rows = client.query(&stmt, &[&no, &after]).await?;
            let mut events = Vec::with_capacity(rows.len());
            for row in rows {
                let seq = uint(row.get(0));
                let data: &str = row.get(3);
                let data = serde_json::from_str(data).map_err(|e| {
                    Fail::Store(StoreError::Backend {
                        message: format!(
                            "the data of event {seq} of task `{task}` is not JSON: {e}"
                        ),
                    })
                })?;
                let mut record =
                    Record::new(row.get::<_, String>(1), row.get::<_, String>(2), data);
                record.message = row.get(4);
                events.push(Event::new(seq, record));
            }
            Ok(events)
        })
        .await
    }

    async fn info(&self, task: &TaskId) -> Result<TaskInfo, StoreError> {
        let task = task.clone();
        self.run(move |client, _| async move {
            let stmt = client
                .prepare_cached(&format!("{INFO} WHERE t.id = $1"))
                .await?;
            let row = client
                .query_opt(&stmt, &[&task.as_str()])
                .await?
                .ok_or_else(|| Fail::Store(unknown(&task)))?;
            task_info(&row)
        })
        .await
    }

    async fn tasks(&self) -> Result<Vec<TaskInfo>, StoreError> {
        self.run(|client, _| async move {
            let stmt = client
                .prepare_cached(&format!("{INFO} ORDER BY t.task_no"))
                .await?;
            client
                .query(&stmt, &[])
                .await?
                .iter()
                .map(task_info)
                .collect()
        })
        .await
    }

    async fn put_snapshot(&self, task: &TaskId, snapshot: &Snapshot) -> Result<(), StoreError> {
        let task = task.clone();
        let snapshot = snapshot.clone();
        self.run(move |client, _| async move {
            let no = task_no(&client, &task).await?;
            // A newer snapshot is never replaced by an older one.
            let stmt = client
                .prepare_cached(
                    "INSERT INTO noeta_snapshots (task_no, seq, plugin_set, state)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (task_no) DO UPDATE
                     SET seq = excluded.seq, plugin_set = excluded.plugin_set,
                         state = excluded.state
                     WHERE noeta_snapshots.seq <= excluded.seq",
                )
                .await?;
            client
                .execute(
                    &stmt,
                    &[
                        &no,
                        &int(snapshot.seq),
                        &snapshot.plugin_set,
                        &snapshot.state,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    async fn snapshot(&self, task: &TaskId) -> Result<Option<Snapshot>, StoreError> {
        let task = task.clone();
        self.run(move |client, _| async move {
            let no = task_no(&client, &task).await?;
            let stmt = client
                .prepare_cached(
                    "SELECT seq, plugin_set, state FROM noeta_snapshots WHERE task_no = $1",
                )
                .await?;
            Ok(client.query_opt(&stmt, &[&no]).await?.map(|row| Snapshot {
                seq: uint(row.get(0)),
                plugin_set: row.get(1),
                state: row.get(2),
            }))
        })
        .await
    }
}

#[async_trait]
impl ContentStore for PgStore {
    async fn put(&self, media_type: &str, body: &[u8]) -> Result<ContentRef, StoreError> {
        let reference = content_ref(media_type, body);
        let sha256 = reference.sha256.clone();
        let body = body.to_vec();
        self.run(move |client, _| async move {
            let stmt = client
                .prepare_cached(
                    "INSERT INTO noeta_content (sha256, len, body) VALUES ($1, $2, $3)
                     ON CONFLICT (sha256) DO NOTHING",
                )
                .await?;
            client
                .execute(&stmt, &[&sha256, &int(body.len() as u64), &body])
                .await?;
            Ok(())
        })
        .await?;
        Ok(reference)
    }

    async fn get(&self, reference: &ContentRef) -> Result<Vec<u8>, StoreError> {
        let sha256 = reference.sha256.clone();
        self.run(move |client, _| async move {
            let stmt = client
                .prepare_cached("SELECT body FROM noeta_content WHERE sha256 = $1")
                .await?;
            client
                .query_opt(&stmt, &[&sha256])
                .await?
                .map(|row| row.get(0))
                .ok_or_else(|| StoreError::MissingContent { sha256 }.into())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_shows() {
        assert_eq!(
            redact("postgres://noeta:s3cret@db.example:5432/noeta"),
            "postgres://noeta:***@db.example:5432/noeta"
        );
        assert_eq!(
            redact("postgresql://noeta@localhost/noeta"),
            "postgresql://noeta@localhost/noeta"
        );
        assert_eq!(redact("host=localhost"), "host=localhost");
    }
}
