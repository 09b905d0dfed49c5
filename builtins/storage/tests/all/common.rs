//! What the storage tests share: task ids, records, temporary store files and raw SQLite access.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::executor::block_on;
use noeta_builtin_storage::SqliteStore;
use noeta_core::store::{EventLog, Lease, ManualClock, Record, TaskId};
use serde_json::json;
use tempfile::TempDir;

/// A lease time long enough that no test's clock reaches it unless it means to.
pub(crate) const TTL: u64 = 10_000;

pub(crate) fn id(name: &str) -> TaskId {
    TaskId::new(name).unwrap()
}

pub(crate) fn rec(n: u64) -> Record {
    Record::new("core", "note", json!({ "n": n }))
}

/// A temporary directory holding one store file, `store.db`.
pub(crate) struct Dir {
    pub(crate) dir: TempDir,
}

impl Dir {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join("store.db")
    }

    pub(crate) fn open(&self, clock: &Arc<ManualClock>) -> SqliteStore {
        SqliteStore::open(self.db(), clock.clone()).unwrap()
    }
}

/// Creates `task` and claims it for `worker`.
pub(crate) fn claimed(log: &dyn EventLog, task: &str, worker: &str) -> Lease {
    let task = id(task);
    block_on(log.create_task(&task, None)).unwrap();
    block_on(log.claim(&task, worker, TTL)).unwrap()
}

/// The sequence numbers of a task's log.
pub(crate) fn seqs(log: &dyn EventLog, task: &TaskId) -> Vec<u64> {
    block_on(log.read(task, 0))
        .unwrap()
        .iter()
        .map(|ev| ev.seq)
        .collect()
}

/// A plain SQLite connection to the store file, outside the store.
pub(crate) fn raw(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn
}
