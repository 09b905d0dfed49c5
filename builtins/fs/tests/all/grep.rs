//! `Grep`: output modes, options, paging, filters, ignore rules and errors.

use serde_json::json;

use crate::common::{Ws, err, ok};

fn sample() -> Ws {
    let ws = Ws::new();
    ws.put("b.txt", "one\nTODO: two\nthree\nfour\nTODO five\n");
    ws.put("a.rs", "fn main() {\n    // TODO\n}\n");
    ws.put("src/c.rs", "nothing here\n");
    ws
}

#[test]
fn files_with_matches_is_the_default_and_sorted_by_path() {
    let ws = sample();
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "TODO" })),
        "Found 2 files\na.rs\nb.txt"
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "absent" })),
        "No files found"
    );
}

#[test]
fn content_mode_shows_numbered_lines_unless_n_is_off() {
    let ws = sample();
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO", "output_mode": "content" })
        ),
        "a.rs:2:    // TODO\nb.txt:2:TODO: two\nb.txt:5:TODO five"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO:", "output_mode": "content", "-n": false })
        ),
        "b.txt:TODO: two"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "absent", "output_mode": "content" })
        ),
        "No matches found"
    );
}

#[test]
fn context_lines_come_with_separators() {
    let ws = sample();
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "two|five", "path": "b.txt", "output_mode": "content", "-B": 1 })
        ),
        "b.txt-1-one\nb.txt:2:TODO: two\n--\nb.txt-4-four\nb.txt:5:TODO five"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO", "output_mode": "content", "-C": 1 })
        ),
        "a.rs-1-fn main() {\na.rs:2:    // TODO\na.rs-3-}\n--\nb.txt-1-one\nb.txt:2:TODO: two\nb.txt-3-three\nb.txt-4-four\nb.txt:5:TODO five"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "two", "path": "b.txt", "output_mode": "content", "context": 2, "-A": 0 })
        ),
        "b.txt-1-one\nb.txt:2:TODO: two"
    );
}

#[test]
fn count_mode_counts_matching_lines_per_file() {
    let ws = sample();
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO", "output_mode": "count" })
        ),
        "Found 3 matches in 2 files\na.rs:1\nb.txt:2"
    );
}

#[test]
fn case_can_be_ignored() {
    let ws = sample();
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "todo", "-i": true })),
        "Found 2 files\na.rs\nb.txt"
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "todo" })),
        "No files found"
    );
}

#[test]
fn head_limit_and_offset_page_through_entries() {
    let ws = Ws::new();
    let body: String = (1..=300).map(|i| format!("hit {i}\n")).collect();
    ws.put("many.txt", &body);
    let text = ok(
        &ws,
        "Grep",
        json!({ "pattern": "hit", "output_mode": "content" }),
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 251);
    assert_eq!(lines[249], "many.txt:250:hit 250");
    assert_eq!(
        lines[250],
        "(showing entries 1–250 of 300; use offset 250 for more)"
    );
    let text = ok(
        &ws,
        "Grep",
        json!({ "pattern": "hit", "output_mode": "content", "offset": 10, "head_limit": 2 }),
    );
    assert_eq!(
        text,
        "many.txt:11:hit 11\nmany.txt:12:hit 12\n(showing entries 11–12 of 300; use offset 12 for more)"
    );
    let text = ok(
        &ws,
        "Grep",
        json!({ "pattern": "hit", "output_mode": "content", "head_limit": 0 }),
    );
    assert_eq!(text.lines().count(), 300);
    let text = ok(
        &ws,
        "Grep",
        json!({ "pattern": "hit", "output_mode": "content", "offset": 400 }),
    );
    assert_eq!(text, "(offset 400 is past the end: there are 300 entries)");
}

#[test]
fn glob_and_type_filter_the_files() {
    let ws = sample();
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "TODO", "glob": "*.txt" })),
        "Found 1 file\nb.txt"
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "e", "glob": "*.{rs,md}" })),
        "Found 1 file\nsrc/c.rs"
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "TODO", "type": "rust" })),
        "Found 1 file\na.rs"
    );
    assert_eq!(
        err(&ws, "Grep", json!({ "pattern": "TODO", "type": "klingon" })),
        "Grep: unknown file type `klingon`"
    );
    let text = err(&ws, "Grep", json!({ "pattern": "TODO", "glob": "src/[a" }));
    assert!(text.starts_with("Grep: invalid glob `src/[a`: "), "{text}");
}

#[test]
fn gitignored_and_hidden_files_are_skipped_unless_u() {
    let ws = Ws::new();
    ws.put(".gitignore", "build/\n");
    ws.put("build/gen.txt", "needle\n");
    ws.put(".cache/x.txt", "needle\n");
    ws.put("src.txt", "needle\n");
    ws.put(".git/config", "needle\n");
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "needle" })),
        "Found 1 file\nsrc.txt"
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "needle", "-u": true })),
        "Found 3 files\n.cache/x.txt\nbuild/gen.txt\nsrc.txt"
    );
}

#[test]
fn multiline_patterns_span_lines() {
    let ws = Ws::new();
    ws.put("m.txt", "start\nmiddle\nend\nafter\n");
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "start.*end" })),
        "No files found"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "start.*end", "multiline": true, "output_mode": "content" })
        ),
        "m.txt:1:start\nm.txt:2:middle\nm.txt:3:end"
    );
}

#[test]
fn binary_files_are_skipped_and_one_file_can_be_searched() {
    let ws = Ws::new();
    ws.put("blob.bin", b"\0\0needle\n");
    ws.put("sub/t.txt", "needle\n");
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "needle" })),
        "Found 1 file\nsub/t.txt"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "needle", "path": "sub/t.txt", "output_mode": "count" })
        ),
        "Found 1 match in 1 file\nsub/t.txt:1"
    );
}

#[test]
fn bad_patterns_and_paths_are_errors() {
    let ws = sample();
    let text = err(&ws, "Grep", json!({ "pattern": "(unclosed" }));
    assert!(
        text.starts_with("Grep: invalid regular expression `(unclosed`: "),
        "{text}"
    );
    assert_eq!(
        err(&ws, "Grep", json!({ "pattern": "x", "path": "missing" })),
        "Grep: `missing` does not exist"
    );
    let text = err(&ws, "Grep", json!({ "pattern": "x", "path": "/" }));
    assert!(text.contains("is outside the workspace"), "{text}");
    let text = err(
        &ws,
        "Grep",
        json!({ "pattern": "x", "output_mode": "lines" }),
    );
    assert!(text.starts_with("Grep: "), "{text}");
}

#[test]
fn only_matching_prints_each_match_on_its_own_line() {
    let ws = Ws::new();
    ws.put("ids.txt", "id=7 and id=42\nnone here\nid=3\n");
    ws.put("z.txt", "ID=9\n");
    let content = |extra: serde_json::Value| {
        let mut input = json!({ "pattern": "id=[0-9]+", "output_mode": "content", "-o": true });
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        ok(&ws, "Grep", input)
    };
    assert_eq!(
        content(json!({})),
        "ids.txt:1:id=7\nids.txt:1:id=42\nids.txt:3:id=3"
    );
    assert_eq!(
        content(json!({ "-n": false })),
        "ids.txt:id=7\nids.txt:id=42\nids.txt:id=3"
    );
    assert_eq!(
        content(json!({ "-i": true })),
        "ids.txt:1:id=7\nids.txt:1:id=42\nids.txt:3:id=3\nz.txt:1:ID=9"
    );
    assert_eq!(
        content(json!({ "path": "ids.txt", "pattern": "[0-9]+$" })),
        "ids.txt:1:42\nids.txt:3:3"
    );
}

#[test]
fn only_matching_ignores_context_and_other_modes() {
    let ws = sample();
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO:? ?", "path": "b.txt", "output_mode": "content", "-o": true, "-C": 2, "-A": 1 })
        ),
        "b.txt:2:TODO: \nb.txt:5:TODO "
    );
    assert_eq!(
        ok(&ws, "Grep", json!({ "pattern": "TODO", "-o": true })),
        "Found 2 files\na.rs\nb.txt"
    );
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "TODO", "output_mode": "count", "-o": true })
        ),
        "Found 3 matches in 2 files\na.rs:1\nb.txt:2"
    );
}

#[test]
fn only_matching_with_multiline_numbers_each_line_of_a_match() {
    let ws = Ws::new();
    ws.put("m.txt", "a start\nmiddle\nend b\nstart end\n");
    assert_eq!(
        ok(
            &ws,
            "Grep",
            json!({ "pattern": "start.*?end", "multiline": true, "output_mode": "content", "-o": true })
        ),
        "m.txt:1:start\nm.txt:2:middle\nm.txt:3:end\nm.txt:4:start end"
    );
}
