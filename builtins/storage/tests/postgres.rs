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
    pg.sql(&url, "INSERT INTO noeta_schema (version) VALUES (99)")
        .unwrap();
    let newer = PgStore::connect(&url, None).unwrap_err().to_string();
    assert!(
        newer.contains("store schema version 99, newer than version 1"),
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
