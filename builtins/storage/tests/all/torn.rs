//! A connection dropped inside a transaction writes nothing (a writer killed mid-transaction,
//! with the log's tail torn, is the `torn` test binary: it re-runs itself as the writer).

use futures::executor::block_on;
use noeta_core::store::{EventLog, ManualClock};

use crate::common::{Dir, claimed, id, raw, rec, seqs};

#[test]
fn a_connection_dropped_inside_a_transaction_writes_nothing() {
    let dir = Dir::new();
    let clock = ManualClock::at(0);
    let store = dir.open(&clock);
    let lease = claimed(&store, "torn", "w1");
    block_on(store.append(&lease, &[rec(1)])).unwrap();
    let conn = raw(&dir.db());
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         INSERT INTO events (task_no, seq, extension, kind, data)
             SELECT task_no, 2, 'core', 'note', '{}' FROM tasks WHERE id = 'torn';",
    )
    .unwrap();
    drop(conn);
    assert_eq!(seqs(&store, &id("torn")), [1]);
    drop(store);
    let store = dir.open(&clock);
    assert_eq!(seqs(&store, &id("torn")), [1]);
    assert_eq!(block_on(store.append(&lease, &[rec(2)])).unwrap(), 2);
}
