//! `check_store` and `salvage`: a sound store checks clean; a damaged one is found out, and what
//! is readable of it is copied into a new file while the old one is left as it was.

use std::path::Path;

use futures::executor::block_on;
use noeta_builtin_storage::{OpenError, SqliteStore, check_store, salvage};
use noeta_core::store::{
    ContentRef, ContentStore, EventLog, ManualClock, Record, Snapshot, StoreError,
};
use serde_json::json;

use crate::common::{Dir, TTL, id};

const EVENTS: u64 = 40;

/// A store of three tasks (`b` a child of `a`) of forty events each, every event about a
/// kilobyte with a marker naming it, every tenth one referring to a content body; `a` has a
/// snapshot at event 20.
fn build(path: &Path) {
    let store = SqliteStore::open(path, ManualClock::at(1_000)).unwrap();
    for (name, parent) in [("a", None), ("b", Some("a")), ("c", None)] {
        let task = id(name);
        block_on(store.create_task(&task, parent.map(id).as_ref())).unwrap();
        let lease = block_on(store.claim(&task, "w", TTL)).unwrap();
        for n in 1..=EVENTS {
            let mut data = json!({
                "marker": format!("MARK-{name}-{n:03}-"),
                "pad": "x".repeat(900),
            });
            if n % 10 == 0 {
                let body = format!("body of {name} {n}");
                let reference = block_on(store.put("text/plain", body.as_bytes())).unwrap();
                data["full"] = serde_json::to_value(reference).unwrap();
            }
            block_on(store.append(&lease, &[Record::new("core", "note", data)])).unwrap();
        }
        block_on(store.release(&lease)).unwrap();
    }
    let snapshot = Snapshot {
        seq: 20,
        plugin_set: "set".to_owned(),
        state: "{}".to_owned(),
    };
    block_on(store.put_snapshot(&id("a"), &snapshot)).unwrap();
}

fn store(path: &Path) -> SqliteStore {
    SqliteStore::open(path, ManualClock::at(2_000)).unwrap()
}

#[test]
fn a_sound_store_checks_clean_and_salvages_whole() {
    let dir = Dir::new();
    build(&dir.db());
    let check = check_store(&dir.db()).unwrap();
    assert_eq!(check.problems, Vec::<String>::new());
    assert_eq!((check.tasks, check.events, check.bodies), (3, 120, 12));

    let copy = dir.dir.path().join("copy.db");
    let salvaged = salvage(&dir.db(), &copy).unwrap();
    assert!(salvaged.complete(), "{salvaged:?}");
    assert_eq!((salvaged.bodies, salvaged.snapshots), (12, 1));
    let copied: Vec<(String, u64)> = salvaged
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.copied))
        .collect();
    assert_eq!(
        copied,
        [("a".into(), 40), ("b".into(), 40), ("c".into(), 40)]
    );
    assert!(check_store(&copy).unwrap().problems.is_empty());

    let (old, new) = (store(&dir.db()), store(&copy));
    for name in ["a", "b", "c"] {
        let task = id(name);
        let (o, n) = (
            block_on(old.read(&task, 0)).unwrap(),
            block_on(new.read(&task, 0)).unwrap(),
        );
        assert_eq!(o, n, "task {name}");
        let (oi, ni) = (
            block_on(old.info(&task)).unwrap(),
            block_on(new.info(&task)).unwrap(),
        );
        assert_eq!((oi.parent, oi.created_ms), (ni.parent, ni.created_ms));
    }
    assert_eq!(
        block_on(new.snapshot(&id("a"))).unwrap().map(|s| s.seq),
        Some(20)
    );
    // No lease travels: the copy's tasks can be claimed at once, at a later epoch.
    let lease = block_on(new.claim(&id("b"), "other", TTL)).unwrap();
    assert!(lease.epoch > 1);
}

#[test]
fn a_damaged_page_is_found_and_the_readable_rest_is_salvaged_leaving_the_old_file_alone() {
    let dir = Dir::new();
    build(&dir.db());
    noeta_testkit::damage::zero_page_holding(&dir.db(), "MARK-b-025-");
    let before = std::fs::read(dir.db()).unwrap();

    let check = check_store(&dir.db()).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.starts_with("SQLite's integrity check")),
        "{:?}",
        check.problems
    );
    assert!(
        check.problems.iter().any(|p| p.starts_with("task `b`: ")),
        "{:?}",
        check.problems
    );

    // Reading the damaged task through the store says what is wrong and what to do.
    let err = block_on(store(&dir.db()).read(&id("b"), 0)).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("store.db` is damaged")
            && message.contains("noeta store check")
            && message.contains("noeta store salvage"),
        "{message}"
    );

    let copy = dir.dir.path().join("copy.db");
    let salvaged = salvage(&dir.db(), &copy).unwrap();
    assert!(!salvaged.complete());
    let b = salvaged.tasks.iter().find(|t| t.id == "b").unwrap();
    assert!(b.copied < 25 && b.copied > 0, "{b:?}");
    assert!(b.lost.is_some());
    let a = salvaged.tasks.iter().find(|t| t.id == "a").unwrap();
    assert_eq!((a.copied, a.lost.clone()), (40, None));
    assert_eq!(
        std::fs::read(dir.db()).unwrap(),
        before,
        "the old file was changed"
    );

    // The copy is sound, and `b` is its readable prefix, gapless.
    let new = store(&copy);
    let seqs: Vec<u64> = block_on(new.read(&id("b"), 0))
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=b.copied).collect::<Vec<_>>());
    drop(new);
    assert_eq!(check_store(&copy).unwrap().problems, Vec::<String>::new());
}

#[test]
fn a_body_that_no_longer_matches_its_address_and_a_gap_are_named() {
    let dir = Dir::new();
    build(&dir.db());
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute(
            "UPDATE content SET body = x'00' WHERE body = CAST('body of c 30' AS BLOB)",
            [],
        )
        .unwrap();
        conn.execute(
            "DELETE FROM events WHERE seq = 7 AND task_no = (SELECT task_no FROM tasks WHERE id = 'c')",
            [],
        )
        .unwrap();
    }
    let check = check_store(&dir.db()).unwrap();
    let joined = check.problems.join("\n");
    assert!(
        joined.contains("task `c`: the log has no event(s) 7: it jumps from event 6 to event 8"),
        "{joined}"
    );
    assert!(joined.contains("hash to"), "{joined}");
    let sha256 = noeta_core::store::content_ref("text/plain", b"body of c 30").sha256;
    assert!(
        joined.contains(&format!("task `c`, event 30: refers to content {sha256}")),
        "{joined}"
    );
    // A salvage keeps `c` up to its gap.
    let salvaged = salvage(&dir.db(), &dir.dir.path().join("copy.db")).unwrap();
    let c = salvaged.tasks.iter().find(|t| t.id == "c").unwrap();
    assert_eq!(c.copied, 6);
}

#[test]
fn a_truncated_file_is_damaged_naming_the_file_and_what_to_do() {
    let dir = Dir::new();
    build(&dir.db());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.db())
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len / 2).unwrap();
    drop(file);
    let check = check_store(&dir.db()).unwrap();
    assert!(!check.problems.is_empty());
    // Opening may still work (the damage is past the pages an open reads); listing may not.
    let listed = SqliteStore::open(dir.db(), ManualClock::at(0))
        .map_err(|e| e.to_string())
        .and_then(|s| {
            block_on(async {
                for task in s.tasks().await? {
                    s.read(&task.id, 0).await?;
                }
                Ok::<_, StoreError>(())
            })
            .map_err(|e| e.to_string())
        });
    let message = listed.unwrap_err();
    assert!(
        message.contains("is damaged") && message.contains("noeta store salvage"),
        "{message}"
    );
}

#[test]
fn a_salvage_never_replaces_a_file_and_needs_a_noeta_store() {
    let dir = Dir::new();
    build(&dir.db());
    let taken = dir.dir.path().join("taken.db");
    std::fs::write(&taken, "mine").unwrap();
    let err = salvage(&dir.db(), &taken).unwrap_err();
    assert!(matches!(err, OpenError::Exists { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "mine");

    let err = salvage(&taken, &dir.dir.path().join("new.db")).unwrap_err();
    assert!(matches!(err, OpenError::NotAStore { .. }), "{err:?}");
    assert!(!dir.dir.path().join("new.db").exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("salvage"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn content_refs_are_found_at_any_depth_and_nothing_else_is_taken_for_one() {
    let r = noeta_core::store::content_ref("text/plain", b"x");
    let as_json = serde_json::to_value(&r).unwrap();
    let data = json!({
        "full": as_json,
        "list": [{"deep": as_json}],
        "not": {"sha256": "short", "len": 1, "media_type": "text/plain"},
        "extra": {"sha256": r.sha256, "len": 1, "media_type": "text/plain", "more": 1},
    });
    assert_eq!(ContentRef::find_in(&data), vec![r.clone(), r]);
}
