//! `memory_archive`: archived memories leave the listing, the search and reads.

use serde_json::json;

use crate::common::{Run, Tools};

#[test]
fn an_archived_memory_is_no_longer_read_searched_or_listed() {
    let t = Tools::new();
    t.dir.put(
        "old",
        "---\ndescription: stale widget facts\n---\n\nwidgets\n",
    );
    t.dir.put("keep", "widgets too\n");
    let text = t.ok("memory_archive", json!({ "name": "old" }));
    assert_eq!(
        text,
        "Archived memory `old` (moved to archive/old.md); it is no longer listed, searched or recalled."
    );
    assert!(!t.dir.path("old.md").exists());
    assert!(t.dir.path("archive/old.md").is_file());
    let err = t.err("memory_read", json!({ "name": "old" }));
    assert!(
        err.starts_with("memory_read: no memory named `old`"),
        "{err}"
    );
    let found = t.ok("memory_search", json!({ "query": "widgets" }));
    assert!(found.starts_with("1 memory matches"), "{found}");
    assert!(!found.contains("old"), "{found}");
    let run = Run::start(&t.dir, "t", "hello");
    let index = run.records("memory", "index");
    let text = index[0].0["index"].as_str().unwrap();
    assert!(text.ends_with("\n- keep"), "{text}");
}

#[test]
fn archiving_the_same_name_twice_keeps_both() {
    let t = Tools::new();
    t.dir.put("n", "first\n");
    t.ok("memory_archive", json!({ "name": "n" }));
    t.dir.put("n", "second\n");
    let text = t.ok("memory_archive", json!({ "name": "n" }));
    assert!(text.contains("moved to archive/n~2.md"), "{text}");
    assert_eq!(
        std::fs::read_to_string(t.dir.path("archive/n.md")).unwrap(),
        "first\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.dir.path("archive/n~2.md")).unwrap(),
        "second\n"
    );
}

#[test]
fn archiving_an_unknown_name_lists_close_names() {
    let t = Tools::new();
    t.dir.put("deploy-notes", "x\n");
    let err = t.err("memory_archive", json!({ "name": "deploy-note" }));
    assert_eq!(
        err,
        "memory_archive: no memory named `deploy-note`; close names: deploy-notes"
    );
    let err = t.err("memory_archive", json!({ "name": "a/b" }));
    assert!(
        err.starts_with("memory_archive: name `a/b` contains a path separator"),
        "{err}"
    );
}
