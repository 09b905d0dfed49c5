//! `memory_read`: the whole file, the size ceiling, unknown names with suggestions.

use serde_json::json;

use crate::common::Tools;

#[test]
fn reading_returns_the_whole_file() {
    let t = Tools::new();
    let file = "---\ndescription: d\nowner: bob\n---\n\nThe body.\n";
    t.dir.put("m", file);
    assert_eq!(t.ok("memory_read", json!({ "name": "m" })), file);
}

#[test]
fn files_over_one_mebibyte_are_refused_naming_the_size() {
    let t = Tools::new();
    t.dir.put("big", "x".repeat(1024 * 1024 + 1));
    let err = t.err("memory_read", json!({ "name": "big" }));
    assert_eq!(
        err,
        "memory_read: memory `big` is 1048577 bytes, over the 1048576-byte (1 MiB) limit"
    );
    t.dir.put("edge", "x".repeat(1024 * 1024));
    assert_eq!(
        t.ok("memory_read", json!({ "name": "edge" })).len(),
        1024 * 1024
    );
}

#[test]
fn an_unknown_name_lists_close_names() {
    let t = Tools::new();
    for name in ["deploy-notes", "deploy-staging", "kitchen"] {
        t.dir.put(name, "body\n");
    }
    let err = t.err("memory_read", json!({ "name": "deploy-note" }));
    assert_eq!(
        err,
        "memory_read: no memory named `deploy-note`; close names: deploy-notes, deploy-staging"
    );
    let err = t.err("memory_read", json!({ "name": "zzz" }));
    assert_eq!(
        err,
        "memory_read: no memory named `zzz` (no close names; memory_search finds memories by their content)"
    );
}

#[test]
fn at_most_ten_close_names_are_listed() {
    let t = Tools::new();
    for n in 1..=12 {
        t.dir.put(&format!("note-{n:02}"), "body\n");
    }
    let err = t.err("memory_read", json!({ "name": "note" }));
    let listed = err.split("close names: ").nth(1).unwrap();
    assert_eq!(listed.split(", ").count(), 10, "{err}");
}

#[test]
fn invalid_names_are_refused_before_any_file_is_touched() {
    let t = Tools::new();
    let err = t.err("memory_read", json!({ "name": "../secret" }));
    assert!(
        err.starts_with("memory_read: name `../secret` contains a path separator"),
        "{err}"
    );
}
