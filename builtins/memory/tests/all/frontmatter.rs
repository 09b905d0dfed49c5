//! Frontmatter forms: none, a byte-order mark, unknown keys, block scalars, broken YAML.

use serde_json::json;

use crate::common::{Run, T0_TEXT, Tools};

#[test]
fn a_file_without_frontmatter_is_all_body_and_gains_frontmatter_on_update() {
    let t = Tools::new();
    t.dir.put("plain", "Just a note about widgets.\n");
    let found = t.ok("memory_search", json!({ "query": "widgets" }));
    assert!(
        found.contains("\n\nplain\n  1: Just a note about widgets."),
        "{found}"
    );
    t.ok(
        "memory_write",
        json!({ "name": "plain", "text": "", "description": "A note" }),
    );
    assert_eq!(
        t.dir.get("plain"),
        format!(
            "---\ndescription: A note\nupdated: {T0_TEXT}\n---\n\nJust a note about widgets.\n"
        )
    );
}

#[test]
fn a_byte_order_mark_is_tolerated_and_not_written_back() {
    let t = Tools::new();
    t.dir.put(
        "bom",
        "\u{feff}---\ndescription: With a mark\n---\n\nbody\n",
    );
    let run = Run::start(&t.dir, "t", "hello");
    assert!(run.provider.residents()[0][0].ends_with("\n- bom — With a mark"));
    assert_eq!(
        t.ok("memory_read", json!({ "name": "bom" })),
        "---\ndescription: With a mark\n---\n\nbody\n"
    );
    t.ok("memory_write", json!({ "name": "bom", "text": "new body" }));
    let file = t.dir.get("bom");
    assert!(
        file.starts_with("---\ndescription: With a mark\n"),
        "{file:?}"
    );
}

#[test]
fn unknown_keys_are_kept_sorted_after_the_known_ones() {
    let t = Tools::new();
    t.dir.put(
        "k",
        "---\nzulu: last\nmeta:\n  source: chat\ndescription: d\nalpha: 1\n---\nbody\n",
    );
    t.ok(
        "memory_write",
        json!({ "name": "k", "text": "", "keywords": "kw" }),
    );
    assert_eq!(
        t.dir.get("k"),
        format!(
            "---\ndescription: d\nkeywords: kw\nupdated: {T0_TEXT}\nalpha: 1\nmeta:\n  source: chat\nzulu: last\n---\n\nbody\n"
        )
    );
    // Writing again with nothing new gives the same bytes but the timestamp.
    let before = t.dir.get("k");
    t.ok("memory_write", json!({ "name": "k", "text": "" }));
    assert_eq!(t.dir.get("k"), before);
}

#[test]
fn a_block_scalar_description_is_read_and_kept() {
    let t = Tools::new();
    t.dir.put(
        "block",
        "---\ndescription: |-\n  First line\n  second line\nkeywords: [alpha, beta]\n---\n\nbody\n",
    );
    let found = t.ok("memory_search", json!({ "query": "second beta" }));
    assert!(
        found.contains("\n\nblock — First line second line"),
        "{found}"
    );
    t.ok(
        "memory_write",
        json!({ "name": "block", "text": "", "type": "reference" }),
    );
    let file = t.dir.get("block");
    assert!(
        file.starts_with("---\ndescription: |-\n  First line\n  second line\ntype: reference\nkeywords:\n- alpha\n- beta\n"),
        "{file}"
    );
}

#[test]
fn broken_frontmatter_is_listed_by_name_and_not_overwritten() {
    let t = Tools::new();
    let broken = "---\ndescription: [unclosed\n---\n\nbody\n";
    t.dir.put("broken", broken);
    let err = t.err("memory_write", json!({ "name": "broken", "text": "x" }));
    assert!(
        err.starts_with("memory_write: memory `broken`: the frontmatter is not valid YAML:"),
        "{err}"
    );
    assert!(err.ends_with("; fix the file or archive it"), "{err}");
    assert_eq!(t.dir.get("broken"), broken);
    let run = Run::start(&t.dir, "t", "hello");
    assert!(run.provider.residents()[0][0].ends_with("\n- broken"));
    assert_eq!(t.ok("memory_read", json!({ "name": "broken" })), broken);
}
