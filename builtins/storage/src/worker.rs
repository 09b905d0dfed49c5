//! The thread that owns a SQLite connection: jobs arrive on a channel and answer on a oneshot.
//!
//! rusqlite is synchronous, and a write may wait on the busy timeout or an
//! fsync. Running every statement on this thread keeps the async methods from
//! blocking whatever executor polls them; nothing here assumes a runtime.
//!
//! **Group commit.** Writes sent with [`Worker::write`] share transactions: the thread begins
//! one for the first write it finds, runs every write already queued behind it (up to
//! [`GROUP_LIMIT`]), each after the first inside its own savepoint, and commits once. A write
//! that fails rolls back to its savepoint (the first, the whole transaction) and is answered
//! at once; the others are answered only after the
//! commit, so no caller sees its write succeed before it is durable, and a failed commit fails
//! them all. With one writer the group is that one write; with several tasks stepping at
//! once, they queue while a commit syncs and the next commit carries them together.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::thread::JoinHandle;

use futures::channel::oneshot;
use noeta_core::store::StoreError;
use rusqlite::Connection;

/// The most writes one transaction carries.
pub(crate) const GROUP_LIMIT: usize = 64;

/// What a grouped write does once its transaction has ended: answer its caller, with its own
/// result when the commit succeeded and with the commit's error when it did not.
type Settle = Box<dyn FnOnce(Result<(), &rusqlite::Error>) + Send>;

enum Job {
    /// Runs by itself, outside any group.
    Alone(Box<dyn FnOnce(&mut Connection) + Send>),
    /// Runs inside a group's transaction and savepoint (or is told why none could begin);
    /// `None` when it failed and has answered.
    Grouped(Write),
}

type Write = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> Option<Settle> + Send>;

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
        self.send(Job::Alone(Box::new(move |conn| {
            // The caller may have gone away; its answer is then dropped.
            let _ = answer.send(job(conn));
        })))?;
        reply.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Runs `job` inside a write transaction it may share with other writes (see the module
    /// docs) and answers once that transaction has committed. `job` neither begins nor commits.
    pub(crate) async fn write<T, E, F>(&self, job: F) -> Result<Result<T, E>, StoreError>
    where
        T: Send + 'static,
        E: From<rusqlite::Error> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let (answer, reply) = oneshot::channel::<Result<T, E>>();
        self.send(Job::Grouped(Box::new(move |conn| {
            match conn.map_err(copy_error).map(job) {
                Ok(Ok(value)) => Some(Box::new(move |committed: Result<(), &rusqlite::Error>| {
                    let _ = answer.send(match committed {
                        Ok(()) => Ok(value),
                        Err(err) => Err(E::from(copy_error(err))),
                    });
                }) as Settle),
                Ok(Err(err)) => {
                    let _ = answer.send(Err(err));
                    None
                }
                Err(err) => {
                    let _ = answer.send(Err(E::from(err)));
                    None
                }
            }
        })))?;
        reply.await.map_err(|_| stopped())
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        let queued = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if queued { Ok(()) } else { Err(stopped()) }
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

fn stopped() -> StoreError {
    StoreError::Backend {
        message: "the SQLite worker gave no answer (the job panicked, or the store is closed)"
            .to_owned(),
    }
}

/// The same error again, for each write of a group whose commit failed.
fn copy_error(err: &rusqlite::Error) -> rusqlite::Error {
    let code = err
        .sqlite_error()
        .copied()
        .unwrap_or_else(|| rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR));
    rusqlite::Error::SqliteFailure(code, Some(err.to_string()))
}

fn serve(mut conn: Connection, queue: &mpsc::Receiver<Job>) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        match job {
            Job::Alone(job) => alone(&mut conn, job),
            Job::Grouped(first) => next = group(&conn, first, queue),
        }
    }
}

fn alone(conn: &mut Connection, job: Box<dyn FnOnce(&mut Connection) + Send>) {
    let outcome = catch_unwind(AssertUnwindSafe(|| job(conn)));
    if outcome.is_err() && !conn.is_autocommit() {
        // A job that panicked inside a transaction must not leave it open for the next job.
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// Runs `first` and the grouped writes queued behind it in one transaction; returns the job
/// that ended the group, if any, to run next.
fn group(conn: &Connection, first: Write, queue: &mpsc::Receiver<Job>) -> Option<Job> {
    if let Err(err) = exec(conn, "BEGIN IMMEDIATE") {
        // Nothing began: the write fails alone, as it would have by itself.
        let _ = catch_unwind(AssertUnwindSafe(|| first(Err(&err))));
        return None;
    }
    // The first write needs no savepoint: when it fails, the transaction holds nothing else.
    let mut settles = Vec::new();
    match catch_unwind(AssertUnwindSafe(|| first(Ok(conn)))) {
        Ok(Some(settle)) => settles.push(settle),
        Ok(None) | Err(_) => {
            let _ = exec(conn, "ROLLBACK");
            return None;
        }
    }
    let mut broken = None;
    let mut after = None;
    while broken.is_none() && settles.len() < GROUP_LIMIT {
        match queue.try_recv() {
            Ok(Job::Grouped(job)) => broken = savepoint(conn, job, &mut settles).err(),
            Ok(other) => {
                after = Some(other);
                break;
            }
            Err(_) => break,
        }
    }
    let ended = match broken {
        Some(err) => Err(err),
        None => exec(conn, "COMMIT"),
    };
    if ended.is_err() && !conn.is_autocommit() {
        let _ = exec(conn, "ROLLBACK");
    }
    for settle in settles {
        settle(ended.as_ref().map(|_| ()));
    }
    after
}

/// Runs one write of a group inside its own savepoint, so that its failure (or panic) undoes
/// only its own statements; a write that succeeded joins `settles`. `Err` when the savepoint
/// itself could not be ended: the transaction is then in no known state and the whole group
/// is rolled back.
fn savepoint(
    conn: &Connection,
    job: Write,
    settles: &mut Vec<Settle>,
) -> Result<(), rusqlite::Error> {
    if let Err(err) = exec(conn, "SAVEPOINT noeta_write") {
        let _ = catch_unwind(AssertUnwindSafe(|| job(Err(&err))));
        return Ok(());
    }
    match catch_unwind(AssertUnwindSafe(|| job(Ok(conn)))) {
        Ok(Some(settle)) => {
            settles.push(settle);
            exec(conn, "RELEASE noeta_write")
        }
        // Failed (and answered), or panicked (its caller hears that the worker gave no answer).
        Ok(None) | Err(_) => {
            exec(conn, "ROLLBACK TO noeta_write").and_then(|()| exec(conn, "RELEASE noeta_write"))
        }
    }
}

/// Runs one statement of the group's frame, prepared once per connection.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
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

    /// A worker on a database file, and a way to hold its thread until writes have queued.
    struct Held {
        dir: tempfile::TempDir,
        worker: Worker,
        release: std::sync::mpsc::Sender<()>,
    }

    fn held() -> Held {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("w.db")).unwrap();
        conn.busy_timeout(std::time::Duration::from_millis(50))
            .unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;
             CREATE TABLE p (id INTEGER PRIMARY KEY);
             CREATE TABLE t (x INTEGER, p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .unwrap();
        let worker = Worker::spawn(conn, "noeta-sqlite-test").unwrap();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        // The thread waits here until `release`, so the writes sent meanwhile queue behind.
        worker
            .send(Job::Alone(Box::new(move |_| {
                let _ = gate.recv();
            })))
            .unwrap();
        Held {
            dir,
            worker,
            release,
        }
    }

    impl Held {
        fn rows(&self) -> i64 {
            Connection::open(self.dir.path().join("w.db"))
                .unwrap()
                .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
                .unwrap()
        }

        /// Sends `writes` (each polled once, so each is queued), releases the thread, and
        /// returns their answers.
        fn run<T: Send + 'static>(
            &self,
            writes: Vec<BoxWrite<T>>,
        ) -> Vec<Result<Result<T, rusqlite::Error>, StoreError>> {
            let mut futures: Vec<_> = writes
                .into_iter()
                .map(|job| Box::pin(self.worker.write(job)))
                .collect();
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            for future in &mut futures {
                assert!(future.as_mut().poll(&mut cx).is_pending());
            }
            self.release.send(()).unwrap();
            block_on(futures::future::join_all(futures))
        }
    }

    type BoxWrite<T> = Box<dyn FnOnce(&Connection) -> Result<T, rusqlite::Error> + Send>;

    /// Inserts `x` and says how many rows another connection on the file sees meanwhile.
    fn insert(path: std::path::PathBuf, x: i64) -> BoxWrite<i64> {
        Box::new(move |conn| {
            conn.execute("INSERT INTO t (x) VALUES (?1)", [x])?;
            Connection::open(&path)?.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        })
    }

    #[test]
    fn writes_queued_together_share_one_commit() {
        let held = held();
        let path = held.dir.path().join("w.db");
        let answers = held.run((0..4).map(|x| insert(path.clone(), x)).collect());
        // Had each write committed alone, the later ones would have seen the earlier rows.
        let seen: Vec<i64> = answers.into_iter().map(|a| a.unwrap().unwrap()).collect();
        assert_eq!(seen, vec![0, 0, 0, 0]);
        assert_eq!(held.rows(), 4);
        // A write by itself is its own group.
        let alone = block_on(held.worker.write(insert(path, 9)))
            .unwrap()
            .unwrap();
        assert_eq!(alone, 4);
    }

    #[test]
    fn a_failing_or_panicking_write_undoes_only_itself() {
        let held = held();
        let path = held.dir.path().join("w.db");
        let answers = held.run(vec![
            insert(path.clone(), 1),
            Box::new(|conn: &Connection| {
                conn.execute("INSERT INTO t (x) VALUES (2)", [])?;
                conn.execute("INSERT INTO nowhere VALUES (2)", [])?;
                Ok(0)
            }),
            Box::new(|conn: &Connection| {
                conn.execute("INSERT INTO t (x) VALUES (3)", []).unwrap();
                panic!("a write that dies mid-group");
            }),
            insert(path, 4),
        ]);
        assert!(answers[0].as_ref().unwrap().is_ok());
        let failed = answers[1].as_ref().unwrap().as_ref().unwrap_err();
        assert!(failed.to_string().contains("nowhere"), "{failed}");
        assert!(
            matches!(&answers[2], Err(StoreError::Backend { message }) if message.contains("gave no answer")),
            "{:?}",
            answers[2]
        );
        assert!(answers[3].as_ref().unwrap().is_ok());
        let xs: Vec<i64> = Connection::open(held.dir.path().join("w.db"))
            .unwrap()
            .prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(xs, vec![1, 4]);
    }

    #[test]
    fn a_first_write_that_fails_undoes_itself_and_the_next_ones_commit() {
        let held = held();
        let path = held.dir.path().join("w.db");
        let answers = held.run(vec![
            Box::new(|conn: &Connection| {
                conn.execute("INSERT INTO t (x) VALUES (1)", [])?;
                conn.execute("INSERT INTO nowhere VALUES (1)", [])?;
                Ok(0)
            }),
            insert(path.clone(), 2),
            insert(path, 3),
        ]);
        assert!(answers[0].as_ref().unwrap().is_err());
        assert!(answers[1].as_ref().unwrap().is_ok());
        assert!(answers[2].as_ref().unwrap().is_ok());
        assert_eq!(held.rows(), 2);
    }

    #[test]
    fn a_failed_commit_fails_every_write_of_its_group_and_writes_nothing() {
        let held = held();
        let path = held.dir.path().join("w.db");
        let answers = held.run(vec![
            insert(path.clone(), 1),
            // Breaks a deferred foreign key: only the commit notices.
            Box::new(|conn: &Connection| {
                conn.execute("INSERT INTO t (x, p) VALUES (2, 42)", [])?;
                Ok(0)
            }),
            insert(path, 3),
        ]);
        for answer in answers {
            let err = answer.unwrap().unwrap_err();
            assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
        }
        assert_eq!(held.rows(), 0);
        // The connection is usable again.
        block_on(held.worker.write(|conn: &Connection| {
            conn.execute("INSERT INTO t (x) VALUES (5)", []).map(|_| ())
        }))
        .unwrap()
        .unwrap();
        assert_eq!(held.rows(), 1);
    }

    #[test]
    fn a_write_that_cannot_begin_fails_alone_with_the_reason() {
        let held = held();
        let other = Connection::open(held.dir.path().join("w.db")).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let answers = held.run(vec![Box::new(|conn: &Connection| {
            conn.execute("INSERT INTO t (x) VALUES (1)", []).map(|_| ())
        }) as BoxWrite<()>]);
        let err = answers[0].as_ref().unwrap().as_ref().unwrap_err();
        assert!(err.to_string().contains("locked"), "{err}");
        other.execute_batch("ROLLBACK").unwrap();
        assert_eq!(held.rows(), 0);
    }
}
