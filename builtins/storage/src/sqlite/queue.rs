//! The SQLite store's task queue: the `queue` and `workers` tables, written in the same
//! `BEGIN IMMEDIATE` transactions as the leases, so several processes on one machine take each
//! runnable task once at a time.

use std::time::Duration;

use async_trait::async_trait;
use noeta_core::store::{Lease, QueueDepth, Queued, StoreError, TaskId, TaskQueue, WorkerSeen};
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, int, task_id, task_no, uint, write};

#[async_trait]
impl TaskQueue for SqliteStore {
    async fn enqueue(&self, task: &TaskId, ready_ms: u64) -> Result<(), StoreError> {
        let task = task.clone();
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            let no = task_no(&tx, &task)?;
            let ready = if ready_ms == 0 {
                clock.now_ms()
            } else {
                ready_ms
            };
            tx.prepare_cached(
                "INSERT INTO queue (task_no, ready_ms, enqueued, generation)
                 VALUES (?1, ?2, (SELECT coalesce(max(enqueued), 0) + 1 FROM queue), 1)
                 ON CONFLICT (task_no) DO UPDATE SET
                     ready_ms = min(ready_ms, excluded.ready_ms),
                     generation = generation + 1",
            )?
            .execute(params![no, int(ready)])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn take(&self, worker: &str, ttl_ms: u64) -> Result<Option<Queued>, StoreError> {
        let worker = worker.to_owned();
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            let now = clock.now_ms();
            let next = tx
                .prepare_cached(
                    "SELECT t.task_no, t.id, t.epoch, q.generation, q.ready_ms
                     FROM queue q JOIN tasks t ON t.task_no = q.task_no
                     WHERE q.ready_ms <= ?1
                       AND (t.lease_expires_ms IS NULL OR t.lease_expires_ms <= ?1)
                     ORDER BY q.ready_ms, q.enqueued
                     LIMIT 1",
                )?
                .query_row([int(now)], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        uint(row.get(2)?),
                        uint(row.get(3)?),
                        uint(row.get(4)?),
                    ))
                })
                .optional()?;
            let Some((no, id, epoch, generation, ready)) = next else {
                return Ok(None);
            };
            let epoch = epoch + 1;
            let expires_ms = now.saturating_add(ttl_ms);
            tx.prepare_cached(
                "UPDATE tasks SET epoch = ?1, lease_worker = ?2, lease_expires_ms = ?3 WHERE task_no = ?4",
            )?
            .execute(params![int(epoch), worker, int(expires_ms), no])?;
            tx.commit()?;
            Ok(Some(Queued {
                lease: Lease {
                    task: task_id(id)?,
                    worker,
                    epoch,
                    expires_ms,
                },
                generation,
                waited_ms: now.saturating_sub(ready),
            }))
        })
        .await
    }

    async fn finish(&self, queued: &Queued) -> Result<(), StoreError> {
        let task = queued.lease.task.clone();
        let generation = queued.generation;
        self.run(move |conn, _| {
            let tx = write(conn)?;
            let no = task_no(&tx, &task)?;
            tx.prepare_cached("DELETE FROM queue WHERE task_no = ?1 AND generation = ?2")?
                .execute(params![no, int(generation)])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn depth(&self) -> Result<QueueDepth, StoreError> {
        self.run(move |conn, clock| {
            let now = int(clock.now_ms());
            let (ready, running, later) = conn
                .prepare_cached(
                    "SELECT
                        coalesce(sum(held), 0),
                        coalesce(sum(NOT held AND ready_ms <= ?1), 0),
                        coalesce(sum(NOT held AND ready_ms > ?1), 0)
                     FROM (SELECT q.ready_ms, (t.lease_expires_ms > ?1) IS TRUE AS held
                           FROM queue q JOIN tasks t ON t.task_no = q.task_no)",
                )?
                .query_row([now], |row| {
                    Ok((
                        row.get::<_, i64>(1)?,
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?;
            Ok(QueueDepth {
                ready: uint(ready),
                running: uint(running),
                later: uint(later),
            })
        })
        .await
    }

    async fn holders(&self) -> Result<Vec<(TaskId, String)>, StoreError> {
        self.run(move |conn, clock| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, lease_worker FROM tasks WHERE lease_expires_ms > ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([int(clock.now_ms())], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })?;
            let mut held = Vec::new();
            for row in rows {
                let (id, worker) = row?;
                held.push((task_id(id)?, worker));
            }
            Ok(held)
        })
        .await
    }

    async fn beat(&self, worker: &str, about: &str) -> Result<(), StoreError> {
        let (worker, about) = (worker.to_owned(), about.to_owned());
        self.run(move |conn, clock| {
            let tx = write(conn)?;
            tx.prepare_cached(
                "INSERT INTO workers (worker, about, seen_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (worker) DO UPDATE SET about = excluded.about, seen_ms = excluded.seen_ms",
            )?
            .execute(params![worker, about, int(clock.now_ms())])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn gone(&self, worker: &str) -> Result<(), StoreError> {
        let worker = worker.to_owned();
        self.run(move |conn, _| {
            let tx = write(conn)?;
            tx.prepare_cached("DELETE FROM workers WHERE worker = ?1")?
                .execute([worker])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn workers(&self, within_ms: u64) -> Result<Vec<WorkerSeen>, StoreError> {
        self.run(move |conn, clock| {
            let since = int(clock.now_ms().saturating_sub(within_ms));
            let mut stmt = conn.prepare_cached(
                "SELECT worker, about, seen_ms FROM workers WHERE seen_ms >= ?1
                 ORDER BY seen_ms DESC, worker",
            )?;
            let rows = stmt.query_map([since], |row| {
                Ok(WorkerSeen {
                    worker: row.get(0)?,
                    about: row.get(1)?,
                    seen_ms: uint(row.get(2)?),
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn wait(&self, max: Duration) {
        // Other processes write the file: there is nothing to be told, so look again soon.
        futures_timer::Delay::new(max.min(Duration::from_millis(50))).await;
    }
}
