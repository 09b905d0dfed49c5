//! `Write`: creating, overwriting after a read, the size limit, the allow-list, dry run.

use noeta_core::canonical::sha256_hex;
use serde_json::{Value, json};

use crate::common::{Ws, apply, call, run, run_in, run_turns};

fn write(path: &str, content: &str) -> (String, Value) {
    call("Write", json!({ "file_path": path, "content": content }))
}

#[test]
fn a_new_file_is_created_with_its_directories() {
    let ws = Ws::new();
    let r = apply(&ws, &[write("deep/er/new.txt", "a\nb\n")]);
    assert_eq!(
        r.last(),
        (
            "File created successfully at: deep/er/new.txt (4 bytes, 2 lines)".to_owned(),
            false
        )
    );
    assert_eq!(ws.get("deep/er/new.txt"), "a\nb\n");
    assert_eq!(
        r.records("write"),
        [json!({
            "path": "deep/er/new.txt",
            "before": null,
            "after": sha256_hex(b"a\nb\n"),
            "applied": true,
            "created": true,
            "bytes": 4,
            "diff": null,
        })]
    );
    assert_eq!(
        r.state()["files"]["deep/er/new.txt"],
        json!(sha256_hex(b"a\nb\n"))
    );
}

#[test]
fn dry_run_creates_nothing() {
    let ws = Ws::new();
    let r = run(&ws, &[write("new.txt", "a\n")]);
    assert_eq!(
        r.last(),
        (
            "NOT WRITTEN: write_mode is dry_run, so `new.txt` was left unchanged on disk. This is what the call would do:\nit would create `new.txt` (2 bytes, 1 lines).".to_owned(),
            false
        )
    );
    assert!(!ws.path("new.txt").exists());
    assert_eq!(r.records("write")[0]["applied"], false);
    assert_eq!(r.state(), Value::Null);
}

#[test]
fn overwriting_needs_a_read_of_the_current_content() {
    let ws = Ws::new();
    ws.put("a.txt", "old\n");
    let r = apply(&ws, &[write("a.txt", "new\n")]);
    assert_eq!(
        r.last(),
        (
            "Write: File has not been read yet. Read `a.txt` first before writing to it."
                .to_owned(),
            true
        )
    );
    assert_eq!(ws.get("a.txt"), "old\n");

    let r = apply(
        &ws,
        &[
            call("Read", json!({ "file_path": "a.txt" })),
            write("a.txt", "new\n"),
        ],
    );
    assert_eq!(
        r.last(),
        (
            "The file `a.txt` has been overwritten (4 bytes, 1 lines).".to_owned(),
            false
        )
    );
    assert_eq!(ws.get("a.txt"), "new\n");
    let record = &r.records("write")[0];
    assert_eq!(record["before"], json!(sha256_hex(b"old\n")));
    assert_eq!(record["created"], false);
    assert_eq!(
        r.diff(record),
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    );

    let r = run_turns(
        Some(&ws),
        json!({ "write_mode": "apply" }),
        &[
            &[call("Read", json!({ "file_path": "a.txt" }))],
            &[write("a.txt", "newer\n")],
        ],
        |n| {
            if n == 0 {
                ws.put("a.txt", "edited by the user\n");
            }
        },
    );
    assert_eq!(
        r.last(),
        (
            "Write: File has been modified since it was read, either by the user or by a linter. Read `a.txt` again before attempting to write it.".to_owned(),
            true
        )
    );
    assert_eq!(ws.get("a.txt"), "edited by the user\n");
}

#[test]
fn a_dry_run_overwrite_shows_the_diff() {
    let ws = Ws::new();
    ws.put("a.txt", "old\n");
    let r = run(
        &ws,
        &[
            call("Read", json!({ "file_path": "a.txt" })),
            write("a.txt", "new\n"),
        ],
    );
    assert_eq!(
        r.last().0,
        "NOT WRITTEN: write_mode is dry_run, so `a.txt` was left unchanged on disk. This is what the call would do:\nit would overwrite `a.txt` (4 bytes, 1 lines) with this change:\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    );
    assert_eq!(ws.get("a.txt"), "old\n");
}

#[test]
fn content_over_8_mib_is_refused() {
    let ws = Ws::new();
    let content = "x".repeat(8 * 1024 * 1024 + 1);
    let r = apply(&ws, &[write("big.txt", &content)]);
    assert_eq!(
        r.last(),
        (
            "Write: the content is 8388609 bytes, more than the 8388608 bytes (8 MiB) one Write may hold".to_owned(),
            true
        )
    );
    assert!(!ws.path("big.txt").exists());
}

#[test]
fn write_path_globs_allow_only_matching_paths() {
    let ws = Ws::new();
    let r = run_in(
        Some(&ws),
        json!({ "write_mode": "apply", "write_path_globs": ["docs/**", "*.md"] }),
        &[
            write("src/main.rs", "fn main() {}\n"),
            write("docs/guide/intro.md", "# Intro\n"),
            write("README.md", "# Readme\n"),
            write("sub/README.md", "# no\n"),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[0],
        (
            "Write: `src/main.rs` is not in the paths this agent may write (write_path_globs: docs/**, *.md)".to_owned(),
            true
        )
    );
    assert!(!results[1].1 && !results[2].1);
    assert!(results[3].1);
    assert!(!ws.path("src/main.rs").exists());
    assert_eq!(ws.get("docs/guide/intro.md"), "# Intro\n");

    // An empty list restricts nothing.
    let r = run_in(
        Some(&ws),
        json!({ "write_mode": "apply", "write_path_globs": [] }),
        &[write("src/main.rs", "fn main() {}\n")],
    );
    assert!(!r.last().1, "{}", r.last().0);
}

#[test]
fn directories_and_paths_outside_are_refused() {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("dir")).unwrap();
    let r = apply(&ws, &[write("dir", "x"), write("../escape.txt", "x")]);
    let results = r.results();
    assert_eq!(
        results[0],
        ("Write: `dir` is a directory, not a file".to_owned(), true)
    );
    assert!(results[1].1 && results[1].0.contains("is outside the workspace"));
}

#[cfg(unix)]
#[test]
fn writing_through_a_symlink_out_of_the_workspace_is_refused() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("gone.txt"), ws.path("dangling.txt")).unwrap();
    let r = apply(
        &ws,
        &[write("out/new/file.txt", "x"), write("dangling.txt", "x")],
    );
    let results = r.results();
    assert!(results[0].1);
    assert!(
        results[0].0.contains("leads through a symlink"),
        "{}",
        results[0].0
    );
    assert!(results[1].1);
    assert!(
        results[1].0.contains("a broken symlink is not followed"),
        "{}",
        results[1].0
    );
    assert!(!outside.path().join("new").exists());
    assert!(!outside.path().join("gone.txt").exists());
}
