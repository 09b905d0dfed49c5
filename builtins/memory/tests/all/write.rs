//! `memory_write`: names, bodies, merging, timestamps, near-duplicates, atomic writes.

use serde_json::json;

use crate::common::{T0_TEXT, Tools};

#[test]
fn creating_writes_the_frontmatter_in_its_fixed_order_then_the_body() {
    let t = Tools::new();
    let text = t.ok(
        "memory_write",
        json!({
            "name": "deploy-notes",
            "text": "Run `make deploy`.\nThen check the dashboard.\n\n",
            "description": "How to deploy the staging server",
            "type": "procedural",
            "keywords": "deploy, staging",
            "related": ["release-steps"]
        }),
    );
    assert!(
        text.starts_with("Created memory `deploy-notes` ("),
        "{text}"
    );
    assert_eq!(
        t.dir.get("deploy-notes"),
        format!(
            "---\ndescription: How to deploy the staging server\ntype: procedural\nkeywords: deploy, staging\nrelated:\n- release-steps\ncreated: {T0_TEXT}\nupdated: {T0_TEXT}\nsource_task: task-1\n---\n\nRun `make deploy`.\nThen check the dashboard.\n"
        )
    );
}

#[test]
fn names_must_match_the_pattern() {
    let t = Tools::new();
    let long_ok = "a".repeat(128);
    for name in ["a", "7z", "Ünïcode_名前.v2-x", long_ok.as_str()] {
        t.ok("memory_write", json!({ "name": name, "text": "body" }));
        assert!(t.dir.path(&format!("{name}.md")).is_file(), "{name}");
    }
    let too_long = "a".repeat(129);
    for name in ["", "_x", "-x", ".hidden", "a b", "a:b", too_long.as_str()] {
        let err = t.err("memory_write", json!({ "name": name, "text": "body" }));
        assert!(
            err.starts_with(&format!(
                "memory_write: name `{name}` is not a valid memory name"
            )),
            "{err}"
        );
    }
}

#[test]
fn names_are_limited_to_240_bytes() {
    let t = Tools::new();
    // 121 characters (within the pattern's 128) but 242 bytes.
    let name = "é".repeat(121);
    let err = t.err("memory_write", json!({ "name": name, "text": "body" }));
    assert_eq!(
        err,
        "memory_write: name is 242 bytes long, over the 240-byte limit"
    );
    let name = "é".repeat(120);
    t.ok("memory_write", json!({ "name": name, "text": "body" }));
}

#[test]
fn path_separators_are_refused() {
    let t = Tools::new();
    for name in ["a/b", "a\\b", "../escape", "/abs"] {
        let err = t.err("memory_write", json!({ "name": name, "text": "body" }));
        assert!(
            err.starts_with(&format!(
                "memory_write: name `{name}` contains a path separator"
            )),
            "{err}"
        );
    }
    assert!(!t.dir.root().parent().unwrap().join("escape.md").exists());
}

#[test]
fn a_new_memory_with_an_empty_body_is_refused() {
    let t = Tools::new();
    for text in ["", "  \n\n "] {
        let err = t.err(
            "memory_write",
            json!({ "name": "empty", "text": text, "description": "d" }),
        );
        assert_eq!(
            err,
            "memory_write: memory `empty` does not exist and text is empty; a new memory needs a body"
        );
    }
    assert!(!t.dir.path("empty.md").exists());
}

#[test]
fn an_update_merges_field_by_field_and_keeps_unknown_keys() {
    let t = Tools::new();
    t.dir.put(
        "prefs",
        "---\ndescription: Editor preferences\nowner: alice\nkeywords: editor\ncreated: 2025-01-01T00:00:00Z\nzeta: [1, 2]\n---\n\nTabs, not spaces.\n",
    );
    let text = t.ok(
        "memory_write",
        json!({ "name": "prefs", "text": "", "type": "user" }),
    );
    assert!(
        text.starts_with("Updated memory `prefs` (changed: type;"),
        "{text}"
    );
    assert_eq!(
        t.dir.get("prefs"),
        format!(
            "---\ndescription: Editor preferences\ntype: user\nkeywords: editor\ncreated: 2025-01-01T00:00:00Z\nupdated: {T0_TEXT}\nowner: alice\nzeta:\n- 1\n- 2\n---\n\nTabs, not spaces.\n"
        )
    );
    let text = t.ok(
        "memory_write",
        json!({ "name": "prefs", "text": "Spaces, four of them.", "description": "", "keywords": "editor, indent" }),
    );
    assert!(text.contains("changed: keywords, body"), "{text}");
    let file = t.dir.get("prefs");
    assert!(file.contains("description: Editor preferences\n"), "{file}");
    assert!(file.contains("keywords: editor, indent\n"), "{file}");
    assert!(file.contains("owner: alice\n"), "{file}");
    assert!(file.ends_with("---\n\nSpaces, four of them.\n"), "{file}");
    assert!(!file.contains("Tabs"), "{file}");
}

#[test]
fn created_is_set_once_and_updated_on_every_write_from_the_clock() {
    let t = Tools::new();
    t.ok("memory_write", json!({ "name": "n", "text": "one" }));
    t.clock.advance(3_600_000 + 1_500);
    t.ok("memory_write", json!({ "name": "n", "text": "two" }));
    let file = t.dir.get("n");
    assert_eq!(
        file,
        "---\ncreated: 2026-01-02T03:04:05Z\nupdated: 2026-01-02T04:04:06Z\nsource_task: task-1\n---\n\ntwo\n"
    );
}

#[test]
fn near_duplicates_by_name_or_description_are_reported() {
    let t = Tools::new();
    t.ok(
        "memory_write",
        json!({ "name": "deploy-notes", "text": "x", "description": "How to deploy the staging server" }),
    );
    let text = t.ok(
        "memory_write",
        json!({ "name": "deploy-note", "text": "y" }),
    );
    assert!(
        text.contains("Similar memories exist: `deploy-notes` (similar name)."),
        "{text}"
    );
    let text = t.ok(
        "memory_write",
        json!({ "name": "release-steps", "text": "z", "description": "How to deploy the staging servers" }),
    );
    assert!(
        text.contains("`deploy-notes` (similar description)"),
        "{text}"
    );
    let text = t.ok(
        "memory_write",
        json!({ "name": "kitchen", "text": "w", "description": "Where the mugs are" }),
    );
    assert!(!text.contains("Similar"), "{text}");
}

#[test]
fn field_values_are_checked_naming_the_field() {
    let t = Tools::new();
    let err = t.err(
        "memory_write",
        json!({ "name": "n", "text": "x", "type": "todo" }),
    );
    assert_eq!(
        err,
        "memory_write: type `todo` is not one of user, project, procedural, reference"
    );
    let err = t.err(
        "memory_write",
        json!({ "name": "n", "text": "x", "related": [1] }),
    );
    assert_eq!(err, "memory_write: related entry `1` is not a string");
    let err = t.err("memory_write", json!({ "name": "n" }));
    assert_eq!(err, "memory_write: text is missing");
    let err = t.err("memory_write", json!({ "name": 5, "text": "x" }));
    assert_eq!(err, "memory_write: name `5` is not a string");
}

#[test]
fn writes_leave_no_temporary_files() {
    let t = Tools::new();
    t.ok("memory_write", json!({ "name": "a", "text": "one" }));
    t.ok("memory_write", json!({ "name": "a", "text": "two" }));
    t.ok("memory_write", json!({ "name": "b", "text": "three" }));
    let mut names: Vec<String> = std::fs::read_dir(t.dir.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.md", "b.md"]);
}
