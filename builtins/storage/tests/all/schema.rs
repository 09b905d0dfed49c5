//! Opening files: the schema and its version, the durability settings, and refusing files that are not noeta stores.

use std::path::Path;

use noeta_builtin_storage::{OpenError, SCHEMA_VERSION, SqliteStore};
use noeta_core::store::{ManualClock, StoreError};

use crate::common::{Dir, raw};

fn open(path: &Path) -> Result<SqliteStore, OpenError> {
    SqliteStore::open(path, ManualClock::at(0))
}

#[test]
fn a_new_file_gets_the_schema_its_version_and_wal() {
    let dir = Dir::new();
    let path = dir.dir.path().join("deep").join("er").join("noeta.db");
    let store = open(&path).unwrap();
    assert_eq!(store.path(), Some(path.as_path()));
    let conn = raw(&path);
    let version: String = conn
        .query_row(
            "SELECT value FROM noeta_meta WHERE key = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION.to_string());
    let format: String = conn
        .query_row(
            "SELECT value FROM noeta_meta WHERE key = 'format'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(format, "noeta-store");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    assert_eq!(
        tables,
        [
            "content",
            "events",
            "noeta_meta",
            "queue",
            "snapshots",
            "tasks",
            "workers"
        ]
    );
}

#[test]
fn a_version_1_file_is_migrated_and_keeps_its_tasks() {
    use futures::executor::block_on;
    use noeta_core::store::{EventLog, Record, TaskId, TaskQueue};
    let dir = Dir::new();
    let store = open(&dir.db()).unwrap();
    let task = TaskId::new("old").unwrap();
    block_on(store.create_task(&task, None)).unwrap();
    let lease = block_on(store.claim(&task, "w", 1_000)).unwrap();
    block_on(store.append(
        &lease,
        &[Record::new("core", "note", serde_json::json!({}))],
    ))
    .unwrap();
    block_on(store.release(&lease)).unwrap();
    drop(store);
    // Back to version 1: no queue, no workers.
    raw(&dir.db())
        .execute_batch(
            "DROP TABLE queue; DROP TABLE workers;
             UPDATE noeta_meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
    let store = open(&dir.db()).unwrap();
    assert_eq!(block_on(store.read(&task, 0)).unwrap().len(), 1);
    block_on(store.enqueue(&task, 0)).unwrap();
    assert_eq!(block_on(store.depth()).unwrap().ready, 1);
    let version: String = raw(&dir.db())
        .query_row(
            "SELECT value FROM noeta_meta WHERE key = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION.to_string());
}

#[test]
fn a_newer_schema_version_is_refused_naming_the_file() {
    let dir = Dir::new();
    drop(open(&dir.db()).unwrap());
    raw(&dir.db())
        .execute(
            "UPDATE noeta_meta SET value = ?1 WHERE key = 'schema_version'",
            [(SCHEMA_VERSION + 1).to_string()],
        )
        .unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(
        matches!(err, OpenError::NewerSchema { found, supported, .. } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("`{}`", dir.db().display())),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "schema version {}, newer than version {SCHEMA_VERSION}",
            SCHEMA_VERSION + 1
        )),
        "{message}"
    );
    let as_store: StoreError = err.into();
    assert!(matches!(as_store, StoreError::Backend { .. }));
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_naming_the_file() {
    let dir = Dir::new();
    std::fs::write(dir.db(), "this is a text file, not a database\n".repeat(50)).unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(matches!(err, OpenError::NotAStore { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not a noeta store: it is not an SQLite database",
            dir.db().display()
        )
    );
    assert!(
        std::fs::read_to_string(dir.db())
            .unwrap()
            .starts_with("this is a text file"),
        "the file is left as it was"
    );
}

#[test]
fn another_sqlite_database_is_refused_and_left_alone() {
    let dir = Dir::new();
    raw(&dir.db())
        .execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');")
        .unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(matches!(err, OpenError::NotAStore { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&dir.db().display().to_string()) && message.contains("no `noeta_meta`"),
        "{message}"
    );
    let tables: i64 = raw(&dir.db())
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1);
}

#[test]
fn a_meta_table_of_another_format_or_a_bad_version_is_refused() {
    let dir = Dir::new();
    drop(open(&dir.db()).unwrap());
    let conn = raw(&dir.db());
    conn.execute(
        "UPDATE noeta_meta SET value = 'two' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(
        err.to_string()
            .contains("has schema version `two`, which is not a number"),
        "{err}"
    );
    conn.execute(
        "UPDATE noeta_meta SET value = 'other-app' WHERE key = 'format'",
        [],
    )
    .unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(
        err.to_string()
            .contains("names format `other-app`, not `noeta-store`"),
        "{err}"
    );
}

#[test]
fn an_empty_file_becomes_a_store() {
    let dir = Dir::new();
    std::fs::write(dir.db(), b"").unwrap();
    let store = open(&dir.db()).unwrap();
    drop(store);
    assert!(open(&dir.db()).is_ok());
}

#[test]
fn a_directory_in_place_of_the_file_is_an_error_naming_it() {
    let dir = Dir::new();
    std::fs::create_dir(dir.db()).unwrap();
    let err = open(&dir.db()).unwrap_err();
    assert!(matches!(err, OpenError::Sqlite { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot open the SQLite store `{}`",
            dir.db().display()
        )),
        "{err}"
    );
}

#[test]
fn the_check_of_a_sound_store_finds_nothing_and_a_file_that_is_no_database_is_refused() {
    let dir = Dir::new();
    let path = dir.db();
    drop(open(&path).unwrap());
    assert_eq!(
        noeta_builtin_storage::check_file(&path).unwrap(),
        Vec::<String>::new()
    );
    std::fs::write(
        &path,
        "plain text, long enough to be read as a header but not SQLite's",
    )
    .unwrap();
    let err = noeta_builtin_storage::check_file(&path).unwrap_err();
    assert!(
        matches!(&err, OpenError::NotAStore { path: named, .. } if *named == path),
        "{err:?}"
    );
}

/// A new store and its journal are readable by their owner alone: another user of the machine
/// reads nothing an agent read or said.
#[test]
#[cfg(unix)]
fn a_new_store_file_and_its_journal_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = Dir::new();
    let clock = noeta_core::store::ManualClock::at(1_000);
    let store = dir.open(&clock);
    let lease = crate::common::claimed(&store, "private", "w1");
    futures::executor::block_on(noeta_core::store::EventLog::append(
        &store,
        &lease,
        &[crate::common::rec(1)],
    ))
    .unwrap();
    for path in [dir.db(), dir.db().with_extension("db-wal")] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    }
}
