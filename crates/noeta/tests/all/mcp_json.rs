//! Claude Code's `.mcp.json`: both shapes, `${VAR}` expansion, keys not used, and files that
//! cannot be used named with why; a workspace's file only when the workspace is trusted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;

use noeta::HostPaths;
use noeta::mcp_json::{read, servers};
use serde_json::json;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

#[test]
fn both_shapes_are_read_with_variables_expanded_and_unused_keys_named() {
    let dir = tempfile::tempdir().unwrap();
    let wrapped = dir.path().join("wrapped.json");
    std::fs::write(
        &wrapped,
        json!({ "mcpServers": {
            "docs": {
                "type": "http",
                "url": "https://${HOST:-mcp.example.com}/mcp",
                "headers": { "Authorization": "Bearer ${TOKEN}" },
                "oauth": { "clientId": "x" }
            }
        }})
        .to_string(),
    )
    .unwrap();
    let (found, ignored) = read(&wrapped, &env).unwrap();
    assert_eq!(
        found["docs"],
        json!({
            "type": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": { "Authorization": "Bearer s3cret" }
        })
    );
    assert_eq!(ignored.len(), 1);
    assert!(
        ignored[0].contains("server `docs`: key `oauth` is not used"),
        "{ignored:?}"
    );

    let bare = dir.path().join("bare.json");
    std::fs::write(
        &bare,
        json!({ "git": { "command": "git-mcp", "args": ["--repo", "${EMPTY:-.}"], "env": { "A": "${UNSET}" } } })
            .to_string(),
    )
    .unwrap();
    let (found, ignored) = read(&bare, &env).unwrap();
    // An unset variable without a default expands to nothing, with a warning naming the
    // server and the variable.
    assert_eq!(
        ignored,
        [format!(
            "{}: server `git`: `${{UNSET}}` is not set, so it expands to nothing; set UNSET, or give a default with `${{UNSET:-value}}`",
            bare.display()
        )]
    );
    assert_eq!(
        found["git"],
        json!({ "command": "git-mcp", "args": ["--repo", "."], "env": { "A": "" } })
    );
}

#[test]
fn files_that_cannot_be_used_are_named_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let err = read(&file("a.json", "{ not json"), &env).unwrap_err();
    assert!(err.contains("a.json: not valid JSON"), "{err}");
    let err = read(&file("b.json", "[1, 2]"), &env).unwrap_err();
    assert!(
        err.contains("b.json: expected a JSON object of servers"),
        "{err}"
    );
    let err = read(&file("c.json", r#"{"mcpServers": []}"#), &env).unwrap_err();
    assert!(err.contains("`mcpServers` must be an object"), "{err}");
    let err = read(&file("d.json", r#"{"x": "npx"}"#), &env).unwrap_err();
    assert!(err.contains("server `x` must be an object"), "{err}");
    let (found, _) = read(Path::new("/nonexistent/.mcp.json"), &env).unwrap();
    assert!(found.is_empty());
}

#[test]
fn a_workspace_file_is_read_only_when_the_workspace_is_trusted() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let workspace = root.path().join("ws");
    std::fs::create_dir_all(home.join(".noeta")).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        home.join(".noeta/.mcp.json"),
        json!({ "mine": { "command": "a" }, "shared": { "command": "user" } }).to_string(),
    )
    .unwrap();
    std::fs::write(
        workspace.join(".mcp.json"),
        json!({ "mcpServers": { "shared": { "command": "project" } } }).to_string(),
    )
    .unwrap();
    let paths = HostPaths {
        home: Some(home.clone()),
        workspace: workspace.clone(),
    };
    let (found, warnings) = servers(&paths);
    assert_eq!(found.keys().collect::<Vec<_>>(), ["mine", "shared"]);
    assert_eq!(found["shared"]["command"], "user");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("not read, since the workspace is not trusted")),
        "{warnings:?}"
    );

    let mut store = paths.trust_store().unwrap();
    store.grant(&workspace).unwrap();
    let (found, warnings) = servers(&paths);
    assert_eq!(
        found["shared"]["command"], "project",
        "the workspace's file wins"
    );
    assert!(warnings.is_empty(), "{warnings:?}");
}
