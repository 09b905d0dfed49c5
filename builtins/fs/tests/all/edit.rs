//! `Edit`: read-first, matching rules, CRLF, dry run and apply, the recorded diff.

use noeta_core::canonical::sha256_hex;
use serde_json::{Value, json};

use crate::common::{Ws, apply, call, numbered, run, run_in, run_turns};

fn read(path: &str) -> (String, Value) {
    call("Read", json!({ "file_path": path }))
}

fn edit(path: &str, old: &str, new: &str) -> (String, Value) {
    call(
        "Edit",
        json!({ "file_path": path, "old_string": old, "new_string": new }),
    )
}

#[test]
fn an_unread_file_cannot_be_edited() {
    let ws = Ws::new();
    ws.put("a.txt", "hello\n");
    let r = apply(&ws, &[edit("a.txt", "hello", "bye")]);
    assert_eq!(
        r.last(),
        (
            "Edit: File has not been read yet. Read `a.txt` first before writing to it.".to_owned(),
            true
        )
    );
    assert_eq!(ws.get("a.txt"), "hello\n");
    assert!(r.records("edit").is_empty());
}

#[test]
fn a_file_changed_since_it_was_read_cannot_be_edited() {
    let ws = Ws::new();
    ws.put("a.txt", "hello\n");
    let r = run_turns(
        Some(&ws),
        json!({ "write_mode": "apply" }),
        &[&[read("a.txt")], &[edit("a.txt", "hello", "bye")]],
        |n| {
            if n == 0 {
                ws.put("a.txt", "hello, changed by a linter\n");
            }
        },
    );
    assert_eq!(
        r.last(),
        (
            "Edit: File has been modified since it was read, either by the user or by a linter. Read `a.txt` again before attempting to write it.".to_owned(),
            true
        )
    );
    assert_eq!(ws.get("a.txt"), "hello, changed by a linter\n");
}

#[test]
fn matching_rules_refuse_no_change_no_match_and_ambiguous_matches() {
    let ws = Ws::new();
    ws.put("a.txt", "x = 1\ny = 1\n");
    let r = apply(
        &ws,
        &[
            read("a.txt"),
            edit("a.txt", "x", "x"),
            edit("a.txt", "z = 1", "z = 2"),
            edit("a.txt", "= 1", "= 2"),
            edit("a.txt", "", "start"),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[1],
        (
            "Edit: No changes to make: old_string and new_string are exactly the same.".to_owned(),
            true
        )
    );
    assert_eq!(
        results[2],
        (
            "Edit: String to replace not found in file.\nString: z = 1".to_owned(),
            true
        )
    );
    assert_eq!(
        results[3],
        (
            "Edit: Found 2 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.".to_owned(),
            true
        )
    );
    assert_eq!(
        results[4],
        (
            "Edit: old_string is empty; to create a file or replace it whole, use Write".to_owned(),
            true
        )
    );
    assert_eq!(ws.get("a.txt"), "x = 1\ny = 1\n");
}

#[test]
fn replace_all_replaces_every_occurrence() {
    let ws = Ws::new();
    ws.put("a.txt", "x = 1\ny = 1\n");
    let r = apply(
        &ws,
        &[
            read("a.txt"),
            call(
                "Edit",
                json!({ "file_path": "a.txt", "old_string": "= 1", "new_string": "= 2", "replace_all": true }),
            ),
        ],
    );
    assert!(
        r.last()
            .0
            .starts_with("The file `a.txt` has been updated (2 replacements).")
    );
    assert_eq!(ws.get("a.txt"), "x = 2\ny = 2\n");
    assert_eq!(r.records("edit")[0]["replacements"], 2);
}

#[test]
fn a_crlf_file_keeps_its_line_endings() {
    let ws = Ws::new();
    ws.put("win.txt", "one\r\ntwo\r\nthree\r\n");
    let r = apply(
        &ws,
        &[read("win.txt"), edit("win.txt", "one\ntwo", "1\n2\n2.5")],
    );
    assert!(!r.last().1, "{}", r.last().0);
    assert_eq!(
        std::fs::read(ws.path("win.txt")).unwrap(),
        b"1\r\n2\r\n2.5\r\nthree\r\n"
    );
}

#[test]
fn dry_run_is_the_default_it_writes_nothing_and_shows_the_diff() {
    let ws = Ws::new();
    ws.put("a.txt", "keep\nold line\nkeep\n");
    let r = run(&ws, &[read("a.txt"), edit("a.txt", "old line", "new line")]);
    let (text, is_error) = r.last();
    assert!(!is_error);
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n keep\n-old line\n+new line\n keep\n";
    assert_eq!(
        text,
        format!(
            "NOT WRITTEN: write_mode is dry_run, so `a.txt` was left unchanged on disk. This is what the call would do:\n1 replacement in `a.txt`:\n{diff}"
        )
    );
    assert_eq!(ws.get("a.txt"), "keep\nold line\nkeep\n");
    let records = r.records("edit");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["applied"], false);
    assert_eq!(r.diff(&records[0]), diff);
    assert_eq!(
        records[0]["before"],
        json!(sha256_hex(b"keep\nold line\nkeep\n"))
    );
    // The registry still holds the digest of the unchanged file.
    assert_eq!(
        r.state()["files"]["a.txt"],
        json!(sha256_hex(b"keep\nold line\nkeep\n"))
    );
}

#[test]
fn apply_writes_reports_a_snippet_and_allows_further_edits_without_rereading() {
    let ws = Ws::new();
    let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    ws.put("a.txt", &body);
    let r = apply(
        &ws,
        &[
            read("a.txt"),
            edit("a.txt", "line 6\n", "line six\nline six and a half\n"),
            edit("a.txt", "line 1\n", "line one\n"),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[1],
        (
            format!(
                "The file `a.txt` has been updated (1 replacement). Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                numbered(
                    2,
                    &[
                        "line 2",
                        "line 3",
                        "line 4",
                        "line 5",
                        "line six",
                        "line six and a half",
                        "line 7",
                        "line 8",
                        "line 9",
                        "line 10"
                    ]
                )
            ),
            false
        )
    );
    assert!(!results[2].1, "{}", results[2].0);
    assert!(ws.get("a.txt").starts_with("line one\nline 2\n"));
    assert!(
        ws.get("a.txt")
            .contains("line six\nline six and a half\nline 7\n")
    );
    let records = r.records("edit");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["applied"], true);
    assert_eq!(
        r.state()["files"]["a.txt"],
        json!(sha256_hex(ws.get("a.txt").as_bytes()))
    );
}

#[test]
fn a_missing_file_a_directory_and_binary_content_are_errors() {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("dir")).unwrap();
    ws.put("bin.dat", b"a\0b");
    let r = apply(
        &ws,
        &[
            edit("nope.txt", "a", "b"),
            edit("dir", "a", "b"),
            edit("../x.txt", "a", "b"),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[0].0,
        "Edit: file `nope.txt` does not exist; use Write to create it"
    );
    assert_eq!(results[1].0, "Edit: `dir` is a directory, not a file");
    assert!(results[2].0.contains("is outside the workspace"));
    assert!(results.iter().all(|(_, e)| *e));
}

#[test]
fn write_path_globs_also_fence_edit() {
    let ws = Ws::new();
    ws.put("src/a.txt", "a\n");
    let r = run_in(
        Some(&ws),
        json!({ "write_mode": "apply", "write_path_globs": ["docs/**"] }),
        &[read("src/a.txt"), edit("src/a.txt", "a", "b")],
    );
    assert_eq!(
        r.last(),
        (
            "Edit: `src/a.txt` is not in the paths this agent may write (write_path_globs: docs/**)"
                .to_owned(),
            true
        )
    );
    assert_eq!(ws.get("src/a.txt"), "a\n");
}
