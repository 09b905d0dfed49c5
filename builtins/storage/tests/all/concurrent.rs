//! Several handles on one file: lease fencing across handles, racing claims, and interleaved appends.

use std::sync::{Arc, Barrier};

use futures::executor::block_on;
use noeta_core::store::{EventLog, ManualClock, StoreError};

use crate::common::{Dir, TTL, claimed, id, rec, seqs};

#[test]
fn a_second_handle_with_a_stale_lease_writes_nothing() {
    let dir = Dir::new();
    let clock = ManualClock::at(1_000);
    let one = dir.open(&clock);
    let two = dir.open(&clock);
    let old = claimed(&one, "shared", "w1");
    block_on(one.append(&old, &[rec(1), rec(2)])).unwrap();

    // While w1's lease is live, the other handle cannot take the task.
    let refused = block_on(two.claim(&old.task, "w2", TTL));
    assert!(
        matches!(&refused, Err(StoreError::Leased { holder, .. }) if holder == "w1"),
        "{refused:?}"
    );

    clock.advance(TTL + 1);
    let new = block_on(two.claim(&old.task, "w2", TTL)).unwrap();
    assert_eq!(new.epoch, old.epoch + 1);
    let res = block_on(one.append(&old, &[rec(3), rec(4)]));
    assert!(
        matches!(
            res,
            Err(StoreError::StaleLease {
                epoch: 1,
                live: 2,
                ..
            })
        ),
        "{res:?}"
    );
    let res = block_on(one.renew(&old, TTL));
    assert!(matches!(res, Err(StoreError::StaleLease { .. })), "{res:?}");
    block_on(one.release(&old)).unwrap();
    assert_eq!(block_on(two.info(&old.task)).unwrap().head, 2);

    assert_eq!(block_on(two.append(&new, &[rec(3)])).unwrap(), 3);
    assert_eq!(seqs(&one, &old.task), [1, 2, 3]);
    assert_eq!(seqs(&two, &old.task), [1, 2, 3]);
    let last = block_on(one.read(&old.task, 2)).unwrap();
    assert_eq!(*last[0].record, rec(3));
}

#[test]
fn racing_claims_from_two_handles_give_one_lease() {
    let dir = Dir::new();
    let clock = ManualClock::at(0);
    let setup = dir.open(&clock);
    for n in 0..20 {
        block_on(setup.create_task(&id(&format!("race-{n}")), None)).unwrap();
    }
    let handles = [Arc::new(dir.open(&clock)), Arc::new(dir.open(&clock))];
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(w, store)| {
            let store = Arc::clone(store);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..20)
                    .map(|n| {
                        block_on(store.claim(&id(&format!("race-{n}")), &format!("w{w}"), TTL))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<Vec<_>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for n in 0..20 {
        let won = results.iter().filter(|r| r[n].is_ok()).count();
        let lost = results
            .iter()
            .filter(|r| matches!(r[n], Err(StoreError::Leased { .. })))
            .count();
        assert_eq!(
            (won, lost),
            (1, 1),
            "task race-{n}: {:?} / {:?}",
            results[0][n],
            results[1][n]
        );
    }
}

#[test]
fn appends_through_two_handles_interleave_without_gaps() {
    let dir = Dir::new();
    let clock = ManualClock::at(0);
    let one = Arc::new(dir.open(&clock));
    let two = Arc::new(dir.open(&clock));
    let leases = [
        claimed(one.as_ref(), "a", "w1"),
        claimed(two.as_ref(), "b", "w2"),
    ];
    let threads: Vec<_> = [one.clone(), two.clone()]
        .into_iter()
        .zip(leases.clone())
        .map(|(store, lease)| {
            std::thread::spawn(move || {
                for n in 0..100 {
                    let last = block_on(store.append(&lease, &[rec(n), rec(n), rec(n)])).unwrap();
                    assert_eq!(last, 3 * (n + 1));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let expected: Vec<u64> = (1..=300).collect();
    for lease in &leases {
        assert_eq!(seqs(one.as_ref(), &lease.task), expected);
        assert_eq!(seqs(two.as_ref(), &lease.task), expected);
    }
}

#[test]
fn one_handle_serves_many_threads() {
    let clock = ManualClock::at(0);
    let store: Arc<dyn EventLog> =
        Arc::new(noeta_builtin_storage::SqliteStore::in_memory(clock).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let lease = claimed(store.as_ref(), &format!("t{t}"), "w");
                for n in 0..50 {
                    block_on(store.append(&lease, &[rec(n)])).unwrap();
                }
                lease.task
            })
        })
        .collect();
    for thread in threads {
        let task = thread.join().unwrap();
        assert_eq!(seqs(store.as_ref(), &task), (1..=50).collect::<Vec<_>>());
    }
}
