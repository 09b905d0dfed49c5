//! `Glob`: pattern semantics, gitignore and hidden files, newest first, the cap, refusals.

use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::common::{Ws, err, ok};

fn touch(ws: &Ws, rel: &str, age_secs: u64) {
    ws.put(rel, rel);
    let file = std::fs::File::options()
        .write(true)
        .open(ws.path(rel))
        .unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
        .unwrap();
}

#[test]
fn matches_are_listed_newest_first_relative_to_the_workspace() {
    let ws = Ws::new();
    touch(&ws, "old.rs", 300);
    touch(&ws, "src/new.rs", 10);
    touch(&ws, "src/deep/mid.rs", 100);
    touch(&ws, "src/readme.md", 5);
    assert_eq!(
        ok(&ws, "Glob", json!({ "pattern": "**/*.rs" })),
        "src/new.rs\nsrc/deep/mid.rs\nold.rs"
    );
    // `*` stays within one path segment.
    assert_eq!(ok(&ws, "Glob", json!({ "pattern": "*.rs" })), "old.rs");
    // The pattern is relative to `path`; paths stay relative to the workspace.
    assert_eq!(
        ok(&ws, "Glob", json!({ "pattern": "*.rs", "path": "src" })),
        "src/new.rs"
    );
}

#[test]
fn gitignored_and_hidden_files_are_skipped_without_a_git_repository() {
    let ws = Ws::new();
    ws.put(".gitignore", "target/\n*.log\n");
    ws.put("keep.txt", "k");
    ws.put("debug.log", "d");
    ws.put("target/out.txt", "o");
    ws.put(".hidden/secret.txt", "s");
    ws.put(".env.txt", "e");
    assert!(!ws.path(".git").exists());
    assert_eq!(ok(&ws, "Glob", json!({ "pattern": "**/*" })), "keep.txt");
}

#[test]
fn more_than_200_matches_are_truncated_with_a_note() {
    let ws = Ws::new();
    for i in 0..205 {
        ws.put(&format!("f{i:03}.txt"), "x");
    }
    let text = ok(&ws, "Glob", json!({ "pattern": "*.txt" }));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 201);
    assert_eq!(
        lines[200],
        "(Results are truncated: showing the 200 most recently modified of 205 files; use a more specific pattern or path)"
    );
}

#[test]
fn nothing_found_and_a_missing_directory_say_no_files_found() {
    let ws = Ws::new();
    ws.put("a.txt", "a");
    assert_eq!(
        ok(&ws, "Glob", json!({ "pattern": "*.rs" })),
        "No files found"
    );
    assert_eq!(
        ok(&ws, "Glob", json!({ "pattern": "*", "path": "missing" })),
        "No files found"
    );
}

#[test]
fn absolute_and_climbing_patterns_bad_globs_and_file_paths_are_refused() {
    let ws = Ws::new();
    ws.put("a.txt", "a");
    for pattern in ["/etc/*", "../*", "src/../../*"] {
        assert_eq!(
            err(&ws, "Glob", json!({ "pattern": pattern })),
            format!(
                "Glob: the pattern `{pattern}` must be relative to the search directory (no leading `/`, no `..`); set `path` to search elsewhere in the workspace"
            )
        );
    }
    let text = err(&ws, "Glob", json!({ "pattern": "src/[a" }));
    assert!(
        text.starts_with("Glob: invalid pattern `src/[a`: "),
        "{text}"
    );
    assert_eq!(
        err(&ws, "Glob", json!({ "pattern": "*", "path": "a.txt" })),
        "Glob: `a.txt` is not a directory"
    );
    let text = err(&ws, "Glob", json!({ "pattern": "*", "path": ".." }));
    assert!(text.contains("is outside the workspace"), "{text}");
}

#[cfg(unix)]
#[test]
fn a_name_that_is_not_utf8_is_shown_escaped_and_opens_read_edits_and_searches_like_any() {
    use std::os::unix::ffi::OsStrExt;
    let ws = Ws::new();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(ws.root().join(name), "one\ntwo words\n").unwrap();
    ws.put("plain.txt", "plain\n");

    let listed = ok(&ws, "Glob", json!({ "pattern": "*.txt" }));
    assert!(listed.contains("caf\\xe9.txt"), "{listed}");
    assert!(!listed.contains('\u{fffd}'), "{listed}");

    let read = ok(&ws, "Read", json!({ "file_path": "caf\\xe9.txt" }));
    assert!(read.contains("two words"), "{read}");

    let found = ok(
        &ws,
        "Grep",
        json!({ "pattern": "two", "output_mode": "files_with_matches" }),
    );
    assert!(found.contains("caf\\xe9.txt"), "{found}");

    // Edited in place, under its own name (no second file).
    let run = crate::common::apply(
        &ws,
        &[
            crate::common::call("Read", json!({ "file_path": "caf\\xe9.txt" })),
            crate::common::call(
                "Edit",
                json!({ "file_path": "caf\\xe9.txt", "old_string": "two", "new_string": "2" }),
            ),
        ],
    );
    let (text, is_error) = run.last();
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.root().join(name)).unwrap(),
        "one\n2 words\n"
    );
    assert_eq!(std::fs::read_dir(ws.root()).unwrap().count(), 2);
    // A missing escaped name is named as given.
    let missing = err(&ws, "Read", json!({ "file_path": "no\\xffne.txt" }));
    assert!(missing.contains("no\\xffne.txt"), "{missing}");
}
