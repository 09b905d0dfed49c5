//! The PostgreSQL store's task queue: `noeta_queue` and `noeta_workers` beside the logs.
//!
//! A worker takes the oldest runnable entry whose task no live lease holds with
//! `FOR UPDATE SKIP LOCKED` and sets the task's lease in the same transaction, so any number of
//! workers on any number of hosts take each runnable task once at a time, never waiting on one
//! another's locks. Enqueuing notifies channel `noeta_queue`; idle workers `LISTEN` on it over
//! a connection of their own (started on the first wait, reconnected when it drops) and fall
//! back to polling when it is down.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::store::{Lease, QueueDepth, Queued, StoreError, TaskId, TaskQueue, WorkerSeen};
use tokio_postgres::{AsyncMessage, NoTls};

use super::{DB_NOW, Fail, PgStore, int, runtime, uint, unknown};

/// The channel enqueues notify.
const CHANNEL: &str = "noeta_queue";

/// The queue's tables (schema version 2).
pub(super) const SCHEMA_V2: &str = "
CREATE TABLE IF NOT EXISTS noeta_queue (
    task_no bigint PRIMARY KEY REFERENCES noeta_tasks (task_no),
    ready_ms bigint NOT NULL,
    enqueued bigserial NOT NULL,
    generation bigint NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS noeta_queue_ready ON noeta_queue (ready_ms, enqueued);
CREATE TABLE IF NOT EXISTS noeta_workers (
    worker text PRIMARY KEY,
    about text NOT NULL,
    seen_ms bigint NOT NULL
);
";

/// The time a statement works with: the test clock's when given, else the database's.
fn now_cte() -> String {
    format!("WITH now AS (SELECT coalesce($1::bigint, {DB_NOW}) AS ms)")
}

/// Wakes idle workers when a notification arrives on [`CHANNEL`].
pub(super) struct Listener {
    pub(super) notify: Arc<tokio::sync::Notify>,
    started: std::sync::Once,
}

impl Listener {
    pub(super) fn new() -> Self {
        Self {
            notify: Arc::new(tokio::sync::Notify::new()),
            started: std::sync::Once::new(),
        }
    }
}

impl PgStore {
    /// Starts the listening connection once, on the store's runtime.
    fn listen(&self) {
        self.listener.started.call_once(|| {
            let Ok(handle) = runtime() else { return };
            let config = self.config.clone();
            let notify = Arc::clone(&self.listener.notify);
            let name = self.name.clone();
            handle.spawn(async move {
                loop {
                    if let Err(err) = listen_once(&config, &notify).await {
                        tracing::debug!(store = %name, "queue listener: {err}; polling meanwhile");
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        });
    }
}

/// One listening connection, until it drops.
async fn listen_once(
    config: &tokio_postgres::Config,
    notify: &tokio::sync::Notify,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (send, mut receive) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = futures::StreamExt::next(&mut messages).await {
            match message {
                Ok(AsyncMessage::Notification(_)) => {
                    let _ = send.send(());
                }
                Ok(_) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    while receive.recv().await.is_some() {
        notify.notify_waiters();
    }
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

#[async_trait]
impl TaskQueue for PgStore {
    async fn enqueue(&self, task: &TaskId, ready_ms: u64) -> Result<(), StoreError> {
        let task = task.clone();
        self.run(move |client, now| async move {
            let ready = (ready_ms > 0).then_some(int(ready_ms)).or(now.map(int));
            let stmt = client
                .prepare_cached(&format!(
                    "INSERT INTO noeta_queue (task_no, ready_ms)
                     SELECT task_no, coalesce($2::bigint, {DB_NOW}) FROM noeta_tasks WHERE id = $1
                     ON CONFLICT (task_no) DO UPDATE SET
                         ready_ms = least(noeta_queue.ready_ms, excluded.ready_ms),
                         generation = noeta_queue.generation + 1"
                ))
                .await?;
            if client.execute(&stmt, &[&task.as_str(), &ready]).await? == 0 {
                return Err(Fail::Store(unknown(&task)));
            }
            client.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
            Ok(())
        })
        .await
    }

    async fn take(&self, worker: &str, ttl_ms: u64) -> Result<Option<Queued>, StoreError> {
        let worker = worker.to_owned();
        self.run(move |mut client, now| async move {
            let tx = client.transaction().await?;
            let pick = tx
                .prepare_cached(&format!(
                    "{} SELECT t.task_no, t.id, t.epoch, q.generation, q.ready_ms, now.ms
                     FROM noeta_queue q JOIN noeta_tasks t ON t.task_no = q.task_no, now
                     WHERE q.ready_ms <= now.ms
                       AND (t.lease_expires_ms IS NULL OR t.lease_expires_ms <= now.ms)
                     ORDER BY q.ready_ms, q.enqueued
                     LIMIT 1
                     FOR UPDATE OF q, t SKIP LOCKED",
                    now_cte()
                ))
                .await?;
            let Some(row) = tx.query_opt(&pick, &[&now.map(int)]).await? else {
                return Ok(None);
            };
            let (no, id): (i64, String) = (row.get(0), row.get(1));
            let epoch = uint(row.get(2)) + 1;
            let (generation, ready, at) = (uint(row.get(3)), uint(row.get(4)), uint(row.get(5)));
            let expires_ms = at.saturating_add(ttl_ms);
            let claim = tx
                .prepare_cached(
                    "UPDATE noeta_tasks SET epoch = $1, lease_worker = $2, lease_expires_ms = $3
                     WHERE task_no = $4",
                )
                .await?;
            tx.execute(&claim, &[&int(epoch), &worker, &int(expires_ms), &no])
                .await?;
            tx.commit().await?;
            let task = TaskId::new(id).map_err(|err| {
                Fail::Store(StoreError::Backend {
                    message: format!("a stored task id is not valid: {err}"),
                })
            })?;
            Ok(Some(Queued {
                lease: Lease {
                    task,
                    worker,
                    epoch,
                    expires_ms,
                },
                generation,
                waited_ms: at.saturating_sub(ready),
            }))
        })
        .await
    }

    async fn finish(&self, queued: &Queued) -> Result<(), StoreError> {
        let task = queued.lease.task.clone();
        let generation = int(queued.generation);
        self.run(move |client, _| async move {
            let stmt = client
                .prepare_cached(
                    "DELETE FROM noeta_queue q USING noeta_tasks t
                     WHERE t.task_no = q.task_no AND t.id = $1 AND q.generation = $2",
                )
                .await?;
            client
                .execute(&stmt, &[&task.as_str(), &generation])
                .await?;
            Ok(())
        })
        .await
    }

    async fn depth(&self) -> Result<QueueDepth, StoreError> {
        self.run(move |client, now| async move {
            let stmt = client
                .prepare_cached(&format!(
                    "{} SELECT
                        count(*) FILTER (WHERE NOT held AND ready_ms <= ms),
                        count(*) FILTER (WHERE held),
                        count(*) FILTER (WHERE NOT held AND ready_ms > ms)
                     FROM (SELECT q.ready_ms, now.ms,
                                  coalesce(t.lease_expires_ms > now.ms, false) AS held
                           FROM noeta_queue q JOIN noeta_tasks t ON t.task_no = q.task_no, now) s",
                    now_cte()
                ))
                .await?;
            let row = client.query_one(&stmt, &[&now.map(int)]).await?;
            Ok(QueueDepth {
                ready: uint(row.get(0)),
                running: uint(row.get(1)),
                later: uint(row.get(2)),
            })
        })
        .await
    }

    async fn holders(&self) -> Result<Vec<(TaskId, String)>, StoreError> {
        self.run(move |client, now| async move {
            let stmt = client
                .prepare_cached(&format!(
                    "{} SELECT id, lease_worker FROM noeta_tasks, now
                     WHERE lease_expires_ms > now.ms ORDER BY id",
                    now_cte()
                ))
                .await?;
            let rows = client.query(&stmt, &[&now.map(int)]).await?;
            let mut held = Vec::new();
            for row in rows {
                let task = TaskId::new(row.get::<_, String>(0)).map_err(|err| {
                    Fail::Store(StoreError::Backend {
                        message: format!("a stored task id is not valid: {err}"),
                    })
                })?;
                held.push((task, row.get(1)));
            }
            Ok(held)
        })
        .await
    }

    async fn beat(&self, worker: &str, about: &str) -> Result<(), StoreError> {
        let (worker, about) = (worker.to_owned(), about.to_owned());
        self.run(move |client, now| async move {
            let stmt = client
                .prepare_cached(&format!(
                    "INSERT INTO noeta_workers (worker, about, seen_ms)
                     VALUES ($1, $2, coalesce($3::bigint, {DB_NOW}))
                     ON CONFLICT (worker) DO UPDATE SET
                         about = excluded.about, seen_ms = excluded.seen_ms"
                ))
                .await?;
            client
                .execute(&stmt, &[&worker, &about, &now.map(int)])
                .await?;
            Ok(())
        })
        .await
    }

    async fn gone(&self, worker: &str) -> Result<(), StoreError> {
        let worker = worker.to_owned();
        self.run(move |client, _| async move {
            let stmt = client
                .prepare_cached("DELETE FROM noeta_workers WHERE worker = $1")
                .await?;
            client.execute(&stmt, &[&worker]).await?;
            Ok(())
        })
        .await
    }

    async fn workers(&self, within_ms: u64) -> Result<Vec<WorkerSeen>, StoreError> {
        self.run(move |client, now| async move {
            let stmt = client
                .prepare_cached(&format!(
                    "{} SELECT worker, about, seen_ms FROM noeta_workers, now
                     WHERE seen_ms >= now.ms - $2
                     ORDER BY seen_ms DESC, worker",
                    now_cte()
                ))
                .await?;
            let rows = client
                .query(&stmt, &[&now.map(int), &int(within_ms)])
                .await?;
            Ok(rows
                .iter()
                .map(|row| WorkerSeen {
                    worker: row.get(0),
                    about: row.get(1),
                    seen_ms: uint(row.get(2)),
                })
                .collect())
        })
        .await
    }

    async fn wait(&self, max: Duration) {
        self.listen();
        let notified = std::pin::pin!(self.listener.notify.notified());
        let timer = futures_timer::Delay::new(max);
        futures::future::select(notified, timer).await;
    }
}
