//! `write_roots`: directories outside the workspace the file tools may also use.

use std::path::{Path, PathBuf};

use noeta_core::canonical::sha256_hex;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Ws, call, numbered, run_in, session, tools};

/// A workspace and a write root beside it.
struct Setup {
    ws: Ws,
    root: TempDir,
}

impl Setup {
    fn new() -> Self {
        Self {
            ws: Ws::new(),
            root: tempfile::tempdir().unwrap(),
        }
    }

    /// The write root as the settings name it.
    fn given(&self) -> String {
        self.root.path().display().to_string()
    }

    /// `rel` in the write root, as the tools see and record it (symlinks resolved).
    fn real(&self, rel: &str) -> String {
        let real: PathBuf = std::fs::canonicalize(self.root.path()).unwrap();
        if rel.is_empty() {
            real.display().to_string()
        } else {
            real.join(rel).display().to_string()
        }
    }

    /// `rel` in the write root, as the model names it.
    fn path(&self, rel: &str) -> String {
        self.root.path().join(rel).display().to_string()
    }

    fn put(&self, rel: &str, content: &str) {
        let path = self.root.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.path().join(rel)).unwrap()
    }

    /// Settings that apply writes with the write root (and `extra`).
    fn settings(&self, extra: Value) -> Value {
        let mut settings = json!({ "write_mode": "apply", "write_roots": [self.given()] });
        settings
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        settings
    }

    /// What the refusals name as allowed.
    fn allowed(&self) -> String {
        format!(
            "the workspace `{}` and the write roots `{}`",
            self.ws.root().display(),
            self.given()
        )
    }
}

#[test]
fn a_file_in_a_write_root_is_read_edited_and_written_by_its_absolute_path() {
    let s = Setup::new();
    s.put("conf/app.toml", "level = 1\n");
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({})),
        &[
            call("Read", json!({ "file_path": s.path("conf/app.toml") })),
            call(
                "Edit",
                json!({ "file_path": s.path("conf/app.toml"), "old_string": "1", "new_string": "2" }),
            ),
            call(
                "Write",
                json!({ "file_path": s.path("new/notes.txt"), "content": "hi\n" }),
            ),
            call(
                "Glob",
                json!({ "pattern": "**/*.toml", "path": s.path("") }),
            ),
            call(
                "Grep",
                json!({ "pattern": "level", "path": s.path(""), "output_mode": "content" }),
            ),
        ],
    );
    let results = r.results();
    assert!(results.iter().all(|(_, e)| !e), "{results:?}");
    let app = s.real("conf/app.toml");
    assert_eq!(results[0].0, numbered(1, &["level = 1"]));
    assert_eq!(
        results[1].0,
        format!(
            "The file `{app}` has been updated (1 replacement). Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
            numbered(1, &["level = 2"])
        )
    );
    assert_eq!(
        results[2].0,
        format!(
            "File created successfully at: {} (3 bytes, 1 lines)",
            s.real("new/notes.txt")
        )
    );
    assert_eq!(results[3].0, app);
    assert_eq!(results[4].0, format!("{app}:1:level = 2"));
    assert_eq!(s.get("conf/app.toml"), "level = 2\n");
    assert_eq!(s.get("new/notes.txt"), "hi\n");
    assert_eq!(
        r.records("read"),
        [json!({ "path": app, "digest": sha256_hex(b"level = 1\n") })]
    );
    let edit = &r.records("edit")[0];
    assert_eq!(edit["path"], json!(app));
    assert_eq!(
        r.diff(edit),
        format!("--- {app}\n+++ {app}\n@@ -1 +1 @@\n-level = 1\n+level = 2\n")
    );
    assert_eq!(r.state()["files"][&app], json!(sha256_hex(b"level = 2\n")));
}

#[test]
fn a_file_in_a_write_root_still_needs_a_read_first() {
    let s = Setup::new();
    s.put("a.txt", "old\n");
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({})),
        &[call(
            "Write",
            json!({ "file_path": s.path("a.txt"), "content": "new\n" }),
        )],
    );
    assert_eq!(
        r.last(),
        (
            format!(
                "Write: File has not been read yet. Read `{}` first before writing to it.",
                s.real("a.txt")
            ),
            true
        )
    );
    assert_eq!(s.get("a.txt"), "old\n");
}

#[test]
fn paths_outside_the_workspace_and_the_write_roots_are_refused() {
    let s = Setup::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("x.txt").display().to_string();
    std::fs::write(elsewhere.path().join("x.txt"), "x\n").unwrap();
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({})),
        &[
            call("Write", json!({ "file_path": target, "content": "y\n" })),
            call("Read", json!({ "file_path": target })),
            call(
                "Write",
                json!({ "file_path": "../escape.txt", "content": "y\n" }),
            ),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[0],
        (
            format!("Write: `{target}` is outside {}", s.allowed()),
            true
        )
    );
    assert_eq!(
        results[1],
        (format!("Read: `{target}` is outside {}", s.allowed()), true)
    );
    assert!(results[2].1, "{results:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");
}

#[cfg(unix)]
#[test]
fn a_symlink_from_a_write_root_to_outside_is_refused_and_a_broken_one_not_followed() {
    let s = Setup::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), s.root.path().join("out")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("gone.txt"),
        s.root.path().join("dangling.txt"),
    )
    .unwrap();
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({})),
        &[
            call(
                "Write",
                json!({ "file_path": s.path("out/new.txt"), "content": "x\n" }),
            ),
            call("Read", json!({ "file_path": s.path("out/secret.txt") })),
            call(
                "Write",
                json!({ "file_path": s.path("dangling.txt"), "content": "x\n" }),
            ),
        ],
    );
    let results = r.results();
    let real_outside = std::fs::canonicalize(outside.path()).unwrap();
    assert_eq!(
        results[0],
        (
            format!(
                "Write: `{}` leads through a symlink to `{}`, outside {}",
                s.path("out/new.txt"),
                real_outside.display(),
                s.allowed()
            ),
            true
        )
    );
    assert!(
        results[1].1 && results[1].0.contains("leads through a symlink"),
        "{results:?}"
    );
    assert!(
        results[2].1 && results[2].0.contains("a broken symlink is not followed"),
        "{results:?}"
    );
    assert!(!outside.path().join("new.txt").exists());
    assert!(!outside.path().join("gone.txt").exists());
}

#[test]
fn write_path_globs_restrict_the_workspace_only() {
    let s = Setup::new();
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({ "write_path_globs": ["docs/**"] })),
        &[
            call(
                "Write",
                json!({ "file_path": s.path("any/where.txt"), "content": "x\n" }),
            ),
            call(
                "Write",
                json!({ "file_path": "src/main.rs", "content": "x\n" }),
            ),
        ],
    );
    let results = r.results();
    assert!(!results[0].1, "{results:?}");
    assert_eq!(
        results[1],
        (
            "Write: `src/main.rs` is not in the paths this agent may write (write_path_globs: docs/**)".to_owned(),
            true
        )
    );
    assert_eq!(s.get("any/where.txt"), "x\n");
}

#[cfg(unix)]
#[test]
fn a_write_root_path_leading_into_the_workspace_is_the_workspaces() {
    let s = Setup::new();
    std::os::unix::fs::symlink(s.ws.root(), s.root.path().join("ws")).unwrap();
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({ "write_path_globs": ["docs/**"] })),
        &[
            call(
                "Write",
                json!({ "file_path": s.path("ws/src/main.rs"), "content": "x\n" }),
            ),
            call(
                "Write",
                json!({ "file_path": s.path("ws/docs/a.md"), "content": "x\n" }),
            ),
        ],
    );
    let results = r.results();
    assert_eq!(
        results[0],
        (
            "Write: `src/main.rs` is not in the paths this agent may write (write_path_globs: docs/**)".to_owned(),
            true
        )
    );
    assert_eq!(
        results[1],
        (
            "File created successfully at: docs/a.md (2 bytes, 1 lines)".to_owned(),
            false
        )
    );
    assert_eq!(r.records("write")[0]["path"], "docs/a.md");
}

#[test]
fn the_shell_is_not_given_the_write_roots() {
    let s = Setup::new();
    let r = run_in(
        Some(&s.ws),
        s.settings(json!({ "shell_allowlist": ["pwd"] })),
        &[call(
            "Bash",
            json!({ "command": format!("cd {}", s.given()) }),
        )],
    );
    assert_eq!(
        r.last(),
        (
            format!(
                "Bash: `{}` is outside the workspace `{}`",
                s.given(),
                s.ws.root().display()
            ),
            true
        )
    );
}

#[test]
fn the_file_tools_name_the_write_roots_in_their_descriptions() {
    let s = Setup::new();
    let with = session(s.settings(json!({}))).unwrap();
    let note = format!(
        " Besides the workspace, files under these directories may be used by absolute path: `{}`.",
        s.real("")
    );
    for tool in tools(&with) {
        let named = tool.description().ends_with(&note);
        let file_tool = ["Read", "Glob", "Grep", "Edit", "Write"].contains(&tool.name());
        assert_eq!(named, file_tool, "{}", tool.name());
    }
    let without = session(Value::Null).unwrap();
    assert!(
        tools(&without)
            .iter()
            .all(|t| !t.description().contains("Besides the workspace"))
    );
}

#[test]
fn write_roots_must_be_absolute_paths_of_existing_directories() {
    let s = Setup::new();
    s.put("file.txt", "x\n");
    let missing = s.root.path().join("missing").display().to_string();
    let file = s.path("file.txt");
    let cases = [
        (
            json!("/tmp"),
            "write_roots: expected a list of directories, got `\"/tmp\"`".to_owned(),
        ),
        (
            json!([7]),
            "write_roots: expected a directory path, got `7`".to_owned(),
        ),
        (
            json!(["relative/dir"]),
            "write_roots: `relative/dir` is not an absolute path".to_owned(),
        ),
        (
            json!([missing]),
            format!("write_roots: `{missing}` is not an existing directory ("),
        ),
        (
            json!([file]),
            format!("write_roots: `{file}` is not a directory"),
        ),
    ];
    for (value, wanted) in cases {
        let err = session(json!({ "write_roots": value }))
            .unwrap_err()
            .to_string();
        assert!(err.contains("settings [plugins.fs]"), "{err}");
        assert!(err.contains(&wanted), "{err}");
    }
    session(json!({ "write_roots": [] })).unwrap();
    assert!(Path::new(&s.given()).is_absolute());
    session(json!({ "write_roots": [s.given()] })).unwrap();
}
