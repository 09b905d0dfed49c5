//! The thread that owns a SQLite connection: jobs arrive on a channel and answer on a oneshot.
//!
//! rusqlite is synchronous, and a write may wait on the busy timeout or an
//! fsync. Running every statement on this thread keeps the async methods from
//! blocking whatever executor polls them; nothing here assumes a runtime.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::thread::JoinHandle;

use futures::channel::oneshot;
use noeta_core::store::StoreError;
use rusqlite::Connection;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A connection on its own thread. Dropping it finishes the queued jobs, closes the connection and joins the thread.
pub(crate) struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Moves `conn` onto a new thread named `name`.
    pub(crate) fn spawn(conn: Connection, name: &str) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || serve(conn, &queue))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Runs `job` on the connection's thread and waits, without blocking, for its answer.
    pub(crate) async fn call<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (answer, reply) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            // The caller may have gone away; its answer is then dropped.
            let _ = answer.send(job(conn));
        });
        let queued = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !queued {
            return Err(stopped());
        }
        reply.await.unwrap_or_else(|_| Err(stopped()))
    }
}

fn stopped() -> StoreError {
    StoreError::Backend {
        message: "the SQLite worker gave no answer (the job panicked, or the store is closed)"
            .to_owned(),
    }
}

fn serve(mut conn: Connection, queue: &mpsc::Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        let outcome = catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
        if outcome.is_err() && !conn.is_autocommit() {
            // A job that panicked inside a transaction must not leave it open for the next job.
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;

    fn worker() -> Worker {
        Worker::spawn(Connection::open_in_memory().unwrap(), "noeta-sqlite-test").unwrap()
    }

    #[test]
    fn jobs_run_on_the_worker_thread() {
        let worker = worker();
        let name = block_on(worker.call(|_| Ok(std::thread::current().name().map(str::to_owned))));
        assert_eq!(name.unwrap().as_deref(), Some("noeta-sqlite-test"));
    }

    #[test]
    fn a_panicking_job_fails_alone_and_its_transaction_is_rolled_back() {
        let worker = worker();
        block_on(worker.call(|conn| {
            conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
            Ok(())
        }))
        .unwrap();
        let failed = block_on(worker.call(|conn| -> Result<(), StoreError> {
            conn.execute_batch("BEGIN; INSERT INTO t VALUES (1);")
                .unwrap();
            panic!("a job that dies mid-transaction");
        }));
        assert!(
            matches!(&failed, Err(StoreError::Backend { message }) if message.contains("gave no answer")),
            "{failed:?}"
        );
        let rows = block_on(worker.call(|conn| {
            let autocommit = conn.is_autocommit();
            let rows: i64 = conn
                .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
                .unwrap();
            Ok((autocommit, rows))
        }));
        assert_eq!(rows.unwrap(), (true, 0));
    }
}
