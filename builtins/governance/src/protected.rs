//! What noeta trusts in a workspace, protected from the agent: a file tool's change to
//! `.noeta/` (settings, the task store, plugins, agents, commands), `.mcp.json`, `.claude/`
//! or `.git`'s `hooks` and `config` always asks a person — whatever the permission mode short
//! of `bypassPermissions`, whatever an allow-list or a hook says — so a model cannot rewrite
//! what decides what runs next time (and a frontend with no person, `noeta mcp serve`,
//! refuses it).

use std::path::{Component, Path, PathBuf};

use noeta_core::records::ToolCall;

/// The file tools and the input key naming the file each changes.
const FILE_TOOLS: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// The protected places, relative to the workspace: a directory protects what is under it.
const PROTECTED: [&str; 5] = [
    ".noeta",
    ".mcp.json",
    ".claude",
    ".git/hooks",
    ".git/config",
];

/// `path` made absolute under `workspace`, its existing part's links resolved and `.`/`..`
/// taken out of the rest.
fn resolved(workspace: &Path, path: &Path) -> PathBuf {
    let joined = workspace.join(path);
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
    for part in rest.iter().rev() {
        match Path::new(part).components().next() {
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(_) => out.push(part),
        }
    }
    out
}

/// The protected place `call` would change in `workspace` (`.noeta`, `.git/hooks`, …), if it
/// is a file tool's call aimed at one.
pub(crate) fn target(workspace: &Path, call: &ToolCall) -> Option<&'static str> {
    let key = FILE_TOOLS
        .iter()
        .find(|(tool, _)| *tool == call.name)
        .map(|(_, key)| *key)?;
    let file = call.input.get(key)?.as_str()?;
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let target = resolved(&root, Path::new(file));
    let inside = target.strip_prefix(&root).ok()?;
    PROTECTED
        .iter()
        .find(|place| inside.starts_with(place))
        .copied()
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
            (
                "MultiEdit",
                "file_path",
                ".git/hooks/pre-commit",
                ".git/hooks",
            ),
            ("Write", "file_path", ".git/config", ".git/config"),
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
            ("Write", "file_path", ".git/HEAD"),
            ("Read", "file_path", ".noeta/config.toml"),
            ("Write", "file_path", "/etc/elsewhere"),
        ] {
            assert_eq!(target(ws, &call(tool, key, path)), None, "{tool} {path}");
        }
    }
}
