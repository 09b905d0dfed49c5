//! A claim's lease (`runner/lease.rs`): renewed only once due, and a lease held by another worker
//! stops the run before it writes anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::executor::block_on;
use noeta_core::ToolOutput;
use noeta_core::runner::RunError;
use noeta_core::session::bare_session;
use noeta_core::store::{EventLog, StoreError};
use noeta_testkit::harness::{Harness, Tapped};
use serde_json::json;

use super::support::{TestTool, call, offers, session, task};

#[test]
fn the_lease_is_renewed_once_a_tenth_of_it_has_passed_not_every_step() {
    let steps = json!([
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "text": "done" }
    ]);
    // A log over the harness's that counts renewals.
    let counted = |h: &Harness| {
        let renewals = Arc::new(AtomicUsize::new(0));
        let seen = renewals.clone();
        let log = Tapped::over(h.log.clone()).on_renew(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        (Arc::new(log), renewals)
    };
    // Quick steps under a one-minute lease: no renewal at all.
    let h = Harness::new();
    let (log, renewals) = counted(&h);
    let s = session(vec![offers(vec![Arc::new(TestTool::new("Work"))])]);
    let t = task("quick");
    let rt = h
        .runtime_over(log.clone(), steps.clone())
        .with_lease_ttl(60_000);
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(renewals.load(Ordering::SeqCst), 0);

    // Steps slower than a tenth of a one-second lease: renewed before each step but the first.
    let h = Harness::new();
    let (log, renewals) = counted(&h);
    let mut slow = TestTool::new("Work");
    slow.reply = |_| {
        std::thread::sleep(std::time::Duration::from_millis(120));
        Ok(ToolOutput::text("slow"))
    };
    let s = session(vec![offers(vec![Arc::new(slow)])]);
    let t = task("slow");
    let rt = h.runtime_over(log.clone(), steps).with_lease_ttl(1_000);
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    // (A fourth only if taking the claim and starting took a tenth of the lease too.)
    let renewals = renewals.load(Ordering::SeqCst);
    assert!((3..=4).contains(&renewals), "{renewals} renewals");
}

#[test]
fn a_stale_lease_writes_nothing_and_stops_the_runner() {
    let h = Harness::new();
    let s = bare_session("main", "");
    let t = task("stale");
    let rt = h.runtime(json!([{ "text": "late" }]));
    block_on(rt.create(&s, &t, "go")).unwrap();
    let head = block_on(h.log.info(&t)).unwrap().head;
    // Another worker holds the task: this one cannot claim it.
    block_on(h.log.claim(&t, "other", 10_000)).unwrap();
    let err = block_on(rt.run(&s, &t)).unwrap_err();
    assert!(
        matches!(err, RunError::Store(StoreError::Leased { .. })),
        "{err}"
    );
    assert_eq!(block_on(h.log.info(&t)).unwrap().head, head);
}
