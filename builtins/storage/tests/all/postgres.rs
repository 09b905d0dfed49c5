//! The PostgreSQL store against a real server (a fresh cluster per test, `noeta_testkit::pg`):
//! the kernel's store contract, fencing on the database's clock whatever the host's says, the
//! schema version check, and clear errors for a bad URL or an unreachable server.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::time::Duration;

use futures::executor::block_on;
use noeta_builtin_storage::{OpenError, PgStore, StoreUrl, Stores};
use noeta_core::store::{EventLog, ManualClock, Record, StoreError, TaskId, contract};
use noeta_testkit::pg::PgServer;
use serde_json::json;

fn server() -> PgServer {
    PgServer::start(false).unwrap_or_else(|why| panic!("{why}"))
}

fn id(name: &str) -> TaskId {
    TaskId::new(name).unwrap()
}

#[test]
fn a_fresh_database_honours_the_contract_and_reopens() {
    let pg = server();
    let url = pg.database().unwrap();
    let clock = ManualClock::at(1_000);
    let store = PgStore::connect(&url, Some(clock.clone())).unwrap();
    let failures = block_on(contract::run(&store, &store, &clock, "a"));
    assert!(failures.is_empty(), "{failures:#?}");
    drop(store);
    // A second connection finds the schema made and the first run's tasks.
    let again = PgStore::connect(&url, Some(clock.clone())).unwrap();
    let failures = block_on(contract::run(&again, &again, &clock, "b"));
    assert!(failures.is_empty(), "{failures:#?}");
    let tasks = block_on(again.tasks()).unwrap();
    assert!(tasks.iter().any(|t| t.id.as_str().starts_with("a-")));
    // Logs read back byte for byte: key order and numbers as appended.
    let task = id("exact");
    block_on(again.create_task(&task, None)).unwrap();
    let lease = block_on(again.claim(&task, "w", 10_000)).unwrap();
    let record = Record::new(
        "x",
        "y",
        json!({ "z": 1, "a": [0.1, 1e300, -0.0], "m": "é" }),
    );
    block_on(again.append(&lease, std::slice::from_ref(&record))).unwrap();
    let read = block_on(again.read(&task, 0)).unwrap();
    assert_eq!(
        serde_json::to_string(&read[0].record.data).unwrap(),
        serde_json::to_string(&record.data).unwrap()
    );
}

/// A lease that lapsed on the database's clock refuses the append, even when the host's clock
/// (here one stuck at the epoch, as if badly skewed) says it is live.
#[test]
fn leases_lapse_on_the_databases_clock_whatever_the_hosts_says() {
    let pg = server();
    let url = pg.database().unwrap();
    let skewed = ManualClock::at(0);
    let stores = Stores::open(
        StoreUrl::parse(&url, std::path::Path::new("/")).unwrap(),
        skewed,
    )
    .unwrap();
    let log = &stores.log;
    let task = id("fenced");
    block_on(log.create_task(&task, None)).unwrap();
    let lease = block_on(log.claim(&task, "w1", 300)).unwrap();
    assert!(
        lease.expires_ms > 1_600_000_000_000,
        "timed by the database: {lease:?}"
    );
    block_on(log.append(&lease, &[Record::new("core", "note", json!({ "n": 1 }))])).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let late = block_on(log.append(&lease, &[Record::new("core", "note", json!({ "n": 2 }))]));
    assert!(
        matches!(late, Err(StoreError::StaleLease { .. })),
        "{late:?}"
    );
    // Another worker takes it, and the first one's lease stays fenced out.
    let taken = block_on(log.claim(&task, "w2", 10_000)).unwrap();
    assert_eq!(taken.epoch, lease.epoch + 1);
    let again = block_on(log.renew(&lease, 10_000));
    assert!(
        matches!(&again, Err(StoreError::StaleLease { holder: Some(h), .. }) if h == "w2"),
        "{again:?}"
    );
    assert_eq!(block_on(log.read(&task, 0)).unwrap().len(), 1);
}

#[test]
fn a_newer_schema_an_unreachable_server_and_a_bad_url_are_named() {
    let pg = server();
    let url = pg.database().unwrap();
    drop(PgStore::connect(&url, None).unwrap());
    // A version-1 database (no queue) is migrated to version 2.
    pg.sql(
        &url,
        "DROP TABLE noeta_queue; DROP TABLE noeta_workers; UPDATE noeta_schema SET version = 1",
    )
    .unwrap();
    drop(PgStore::connect(&url, None).unwrap());
    let version = pg
        .sql(&url, "SELECT max(version) FROM noeta_schema")
        .unwrap();
    assert_eq!(version.trim(), "2", "{version}");
    pg.sql(&url, "SELECT count(*) FROM noeta_queue").unwrap();
    pg.sql(&url, "INSERT INTO noeta_schema (version) VALUES (99)")
        .unwrap();
    let newer = PgStore::connect(&url, None).unwrap_err().to_string();
    assert!(
        newer.contains("store schema version 99, newer than version 2"),
        "{newer}"
    );

    // Nothing listens there (the server is gone); the password is not shown.
    let port = url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    drop(pg);
    let gone = format!("postgres://postgres:hunter2@127.0.0.1:{port}/x");
    let err = PgStore::connect(&gone, None).unwrap_err();
    assert!(matches!(err, OpenError::Postgres { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("postgres://postgres:***@127.0.0.1"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    let bad = StoreUrl::parse("postgres:nothing", std::path::Path::new("/")).unwrap_err();
    assert!(
        bad.to_string()
            .contains("postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"),
        "{bad}"
    );
    let unknown = StoreUrl::parse("mysql://x/y", std::path::Path::new("/")).unwrap_err();
    assert!(unknown.to_string().contains("`postgres://…`"), "{unknown}");
}

/// A one-step scripted model.
fn model() -> std::sync::Arc<noeta_core::provider::ScriptedProvider> {
    std::sync::Arc::new(
        noeta_core::provider::ScriptedProvider::from_json(
            &json!({ "turns": [{ "text": "done" }] }).to_string(),
            "test",
        )
        .unwrap(),
    )
}

/// One session for every agent.
struct Only(std::sync::Arc<noeta_core::session::Session>);

impl noeta_core::runner::Sessions for Only {
    fn session(&self, _agent: &str) -> Option<std::sync::Arc<noeta_core::session::Session>> {
        Some(self.0.clone())
    }
}

/// The queue's contract, then a thousand tasks taken by four workers in one process (each
/// with connections of its own, as if on four hosts), each task run by the runtime as a pool
/// worker runs it: every task runs, and no step is taken twice.
#[test]
fn the_queue_holds_its_contract_and_four_workers_run_a_thousand_tasks_once() {
    use noeta_core::runner::Runtime;
    use noeta_core::store::{QueueDepth, TaskQueue, contract::run_queue};
    use std::sync::Arc;
    let pg = server();
    let url = pg.database().unwrap();
    let clock = ManualClock::at(1_000);
    let timed = PgStore::connect(&url, Some(clock.clone())).unwrap();
    let failures = block_on(run_queue(&timed, &timed, &clock, "q"));
    assert!(failures.is_empty(), "{failures:#?}");
    drop(timed);

    let session = Arc::new(noeta_core::session::bare_session("main", "Answer."));
    let store = Arc::new(PgStore::connect(&url, None).unwrap());
    let maker = Runtime::new(store.clone(), store.clone(), model());
    const TASKS: usize = 1_000;
    for n in 0..TASKS {
        let task = id(&format!("job-{n:04}"));
        block_on(maker.create(&session, &task, "say done")).unwrap();
        block_on(store.enqueue(&task, 0)).unwrap();
    }
    let ran: Vec<Vec<String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let url = url.clone();
                let sessions = Only(session.clone());
                scope.spawn(move || {
                    let store = Arc::new(PgStore::connect(&url, None).unwrap());
                    let name = format!("worker-{w}");
                    let runtime = Runtime::new(store.clone(), store.clone(), model())
                        .with_worker(name.clone())
                        .as_pool_worker();
                    let mut mine = Vec::new();
                    loop {
                        let Some(taken) = block_on(store.take(&name, 30_000)).unwrap() else {
                            if block_on(store.depth()).unwrap() == QueueDepth::default() {
                                return mine;
                            }
                            block_on(store.wait(Duration::from_millis(100)));
                            continue;
                        };
                        block_on(runtime.run_queued(&sessions, store.as_ref(), &taken)).unwrap();
                        mine.push(taken.lease.task.to_string());
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<&String> = ran.iter().flatten().collect();
    assert_eq!(all.len(), TASKS, "every take ran a task");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), TASKS, "no task was taken twice");
    assert!(
        ran.iter().all(|mine| !mine.is_empty()),
        "every worker took tasks: {:?}",
        ran.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for n in 0..TASKS {
        let events = block_on(store.read(&id(&format!("job-{n:04}")), 0)).unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.record.kind.as_str()).collect();
        let replies = kinds.iter().filter(|k| **k == "assistant_reply").count();
        assert_eq!(replies, 1, "job-{n:04} took one model step: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"turn_ended"), "job-{n:04}: {kinds:?}");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
}

/// A pool worker that lacks a plugin the task was pinned with refuses it through the queue:
/// recorded, the lease left to lapse on the database for a worker that has it; the third
/// refusal fails the task with `plugin_missing`, and its entry ends.
#[test]
fn three_refused_takes_fail_a_task_with_plugin_missing() {
    use noeta_core::runner::{RunError, RunOutcome, Runtime};
    use noeta_core::store::{QueueDepth, TaskQueue};
    use std::sync::Arc;
    let pg = server();
    let url = pg.database().unwrap();
    let clock = ManualClock::at(1_000);
    let store = Arc::new(PgStore::connect(&url, Some(clock.clone())).unwrap());
    let mut pinned = noeta_core::session::bare_session("main", "");
    pinned.pins = vec![noeta_core::records::PluginPin {
        name: "house".into(),
        source: "file".into(),
        version: "1.0.0".into(),
        params: "p".into(),
    }];
    let task = id("pinned");
    let maker = Runtime::new(store.clone(), store.clone(), model());
    block_on(maker.create(&pinned, &task, "go")).unwrap();
    block_on(store.enqueue(&task, 0)).unwrap();
    let lacking = Only(Arc::new(noeta_core::session::bare_session("main", "")));
    let worker = Runtime::new(store.clone(), store.clone(), model())
        .with_worker("lacking")
        .with_lease_ttl(1_000)
        .as_pool_worker();
    for round in 1..=2 {
        let taken = block_on(store.take("lacking", 1_000)).unwrap().unwrap();
        let err = block_on(worker.run_queued(&lacking, store.as_ref(), &taken)).unwrap_err();
        assert!(
            matches!(err, RunError::PluginMissing { .. }),
            "round {round}: {err}"
        );
        assert!(block_on(store.take("other", 1_000)).unwrap().is_none());
        clock.advance(2_000);
    }
    let taken = block_on(store.take("lacking", 1_000)).unwrap().unwrap();
    let ran = block_on(worker.run_queued(&lacking, store.as_ref(), &taken)).unwrap();
    assert!(
        matches!(&ran.outcome, RunOutcome::TaskFailed { reason } if reason.starts_with("plugin_missing: ")),
        "{ran:?}"
    );
    clock.advance(2_000);
    assert_eq!(block_on(store.depth()).unwrap(), QueueDepth::default());
    let refused = block_on(store.read(&task, 0))
        .unwrap()
        .iter()
        .filter(|e| e.record.kind == "claim_refused")
        .count();
    assert_eq!(refused, 3);
}

/// An idle worker waiting on the queue wakes when a task is enqueued from another connection
/// (LISTEN/NOTIFY), long before its polling interval.
#[test]
fn an_enqueue_wakes_a_waiting_worker() {
    use noeta_core::store::TaskQueue;
    let pg = server();
    let url = pg.database().unwrap();
    let worker = PgStore::connect(&url, None).unwrap();
    let other = PgStore::connect(&url, None).unwrap();
    let task = id("wake-me");
    block_on(other.create_task(&task, None)).unwrap();
    // The first wait starts the listener; give it a moment to connect.
    block_on(worker.wait(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            block_on(other.enqueue(&task, 0)).unwrap();
        });
        block_on(worker.wait(Duration::from_secs(20)));
    });
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(10), "woken after {waited:?}");
    assert!(block_on(worker.take("w", 10_000)).unwrap().is_some());
}
