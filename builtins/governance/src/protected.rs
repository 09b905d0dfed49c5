//! What noeta trusts in a workspace, protected from the agent: a file tool's change to
//! `.noeta/` (settings, the task store, plugins, agents, commands), `.mcp.json`, `.claude/`
//! or `.git`'s `hooks` and `config` always asks a person — whatever the permission mode short
//! of `bypassPermissions`, whatever an allow-list or a hook says — so a model cannot rewrite
//! what decides what runs next time (and a frontend with no person, `noeta mcp serve`,
//! refuses it).

use std::path::{Component, Path, PathBuf};

use noeta_core::model::ToolCall;

/// The file tools and the input key naming the file each changes.
const FILE_TOOLS: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// The protected places, relative to the workspace: a directory protects what is under it. All
/// of `.git` is: its configuration, hooks, `commondir` and the rest decide what git runs.
const PROTECTED: [&str; 4] = [".noeta", ".mcp.json", ".claude", ".git"];

/// `path` with `.` and `..` taken out by their text alone, as the file tools take them out.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` made absolute under `workspace` and resolved: `.` and `..` taken out first (so a
/// `..` after a directory that does not exist cannot hide the target), then the links of the
/// part that exists.
fn resolved(workspace: &Path, path: &Path) -> PathBuf {
    let joined = lexical(&workspace.join(path));
    let mut existing = joined.as_path();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break existing.to_path_buf(),
        }
    };
    let mut out = base;
    out.extend(rest.iter().rev());
    out
}

/// The protected place `call` would change in `workspace` (`.noeta`, `.git`, …), if it is a
/// file tool's call aimed at one. Compared without regard to case, as a file system that
/// ignores case would; a path that cannot be placed inside the workspace is not this
/// check's to judge (the file tools refuse it).
pub(crate) fn target(workspace: &Path, call: &ToolCall) -> Option<&'static str> {
    let key = FILE_TOOLS
        .iter()
        .find(|(tool, _)| *tool == call.name)
        .map(|(_, key)| *key)?;
    let file = call.input.get(key)?.as_str()?;
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let target = resolved(&root, Path::new(file));
    let inside = target.strip_prefix(&root).ok()?;
    let first = inside
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .to_lowercase();
    PROTECTED.iter().find(|place| **place == first).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, key: &str, path: &str) -> ToolCall {
        ToolCall {
            id: "c".to_owned(),
            name: name.to_owned(),
            input: json!({ key: path }),
        }
    }

    #[test]
    fn a_file_tool_aimed_at_what_noeta_trusts_is_found_however_the_path_is_spelt() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".noeta")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::os::unix::fs::symlink(ws.join(".noeta"), ws.join("looks-harmless")).unwrap();
        let absolute = ws.join(".mcp.json").display().to_string();
        for (tool, key, path, place) in [
            ("Write", "file_path", ".noeta/config.toml", ".noeta"),
            ("Edit", "file_path", "./.noeta/noeta.db", ".noeta"),
            ("Write", "file_path", "src/../.noeta/agents/x.md", ".noeta"),
            ("Write", "file_path", "looks-harmless/config.toml", ".noeta"),
            ("Write", "file_path", absolute.as_str(), ".mcp.json"),
            ("Write", "file_path", ".claude/settings.json", ".claude"),
            ("MultiEdit", "file_path", ".git/hooks/pre-commit", ".git"),
            ("Write", "file_path", ".git/config", ".git"),
            ("Write", "file_path", ".git/commondir", ".git"),
            ("Write", "file_path", "zz/../.git/hooks/pre-commit", ".git"),
            (
                "Edit",
                "file_path",
                "no/such/dir/../../../.mcp.json",
                ".mcp.json",
            ),
            ("Write", "file_path", ".NOETA/config.toml", ".noeta"),
            ("Write", "file_path", ".Claude/settings.json", ".claude"),
            ("NotebookEdit", "notebook_path", ".noeta/n.ipynb", ".noeta"),
        ] {
            assert_eq!(
                target(ws, &call(tool, key, path)),
                Some(place),
                "{tool} {path}"
            );
        }
        for (tool, key, path) in [
            ("Write", "file_path", "src/main.rs"),
            ("Write", "file_path", ".noetarc"),
            ("Read", "file_path", ".noeta/config.toml"),
            ("Write", "file_path", "/etc/elsewhere"),
        ] {
            assert_eq!(target(ws, &call(tool, key, path)), None, "{tool} {path}");
        }
    }
}
