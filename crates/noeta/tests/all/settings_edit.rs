//! `settings_edit`: MCP servers added to and removed from a settings file in place — comments
//! and layout kept, bad servers and broken files refused with the file and key named, nothing
//! written then.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::PathBuf;

use noeta::settings_edit::{EditError, add_mcp_server, remove_mcp_server};
use noeta::{Layer, Settings};
use serde_json::json;

fn file(text: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".noeta/config.toml");
    if let Some(text) = text {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    (dir, path)
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_server_is_added_beneath_what_is_there_with_its_comments_kept() {
    let before = "# my settings\n[plugins.providers]  # keep me\nmax_retries = 2\n";
    let (_dir, path) = file(Some(before));
    add_mcp_server(
        &path,
        "git",
        &json!({ "env": { "TOKEN": "{env:GIT_TOKEN}" }, "args": ["--repo", "."], "command": "git-mcp" }),
    )
    .unwrap();
    let after = read(&path);
    assert!(after.starts_with(before), "{after}");
    assert!(
        after.ends_with(
            "\n[plugins.mcp.servers.git]\ncommand = \"git-mcp\"\nargs = [\"--repo\", \".\"]\nenv = { TOKEN = \"{env:GIT_TOKEN}\" }\n"
        ),
        "{after}"
    );
    let settings = Settings::parse(&after, "t", Layer::User).unwrap();
    let servers = &settings.params("mcp").unwrap()["servers"];
    assert_eq!(servers["git"]["command"], json!("git-mcp"));

    remove_mcp_server(&path, "git", "").unwrap();
    let removed = read(&path);
    assert!(removed.starts_with(before), "{removed}");
    assert!(!removed.contains("git-mcp"), "{removed}");
    Settings::parse(&removed, "t", Layer::User).unwrap();
}

#[test]
fn a_missing_file_is_made_and_an_inline_servers_table_is_extended() {
    let (_dir, path) = file(None);
    add_mcp_server(&path, "docs", &json!({ "url": "https://example.com/mcp" })).unwrap();
    assert_eq!(
        read(&path),
        "[plugins.mcp.servers.docs]\nurl = \"https://example.com/mcp\"\n"
    );

    let (_dir, path) = file(Some(
        "[plugins.mcp]\nservers = { a = { command = \"a\" } }\n",
    ));
    add_mcp_server(&path, "b", &json!({ "command": "b" })).unwrap();
    let settings = Settings::parse(&read(&path), "t", Layer::User).unwrap();
    let servers = &settings.params("mcp").unwrap()["servers"];
    assert_eq!(servers["a"]["command"], json!("a"));
    assert_eq!(servers["b"]["command"], json!("b"));
}

#[test]
fn bad_servers_taken_aliases_and_broken_files_are_refused_and_nothing_is_written() {
    let before = "[plugins.mcp.servers.git]\ncommand = \"git-mcp\"\n";
    let (_dir, path) = file(Some(before));
    let err = add_mcp_server(&path, "git", &json!({ "command": "other" })).unwrap_err();
    assert!(matches!(err, EditError::Exists { .. }));
    assert!(err.to_string().ends_with(
        "MCP server `git` is already configured here; `noeta mcp remove git` first to replace it"
    ));
    let err = add_mcp_server(&path, "web", &json!({ "url": "ftp://x" })).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("MCP server `web` is not valid: settings [plugins.mcp] servers.web.url: `ftp://x` is not an http(s) URL"),
        "{err}"
    );
    let err =
        add_mcp_server(&path, "two", &json!({ "command": "a", "url": "http://h" })).unwrap_err();
    assert!(err.to_string().contains("not both"), "{err}");
    let err = remove_mcp_server(&path, "nope", " (it is configured in /x/.mcp.json)").unwrap_err();
    assert!(
        err.to_string().ends_with(
            "no MCP server `nope` is configured here (it is configured in /x/.mcp.json)"
        ),
        "{err}"
    );
    assert_eq!(read(&path), before, "a refused change writes nothing");

    let broken = "[plugins.mcp\ncommand = 1\n";
    let (_dir, path) = file(Some(broken));
    let err = add_mcp_server(&path, "git", &json!({ "command": "git-mcp" })).unwrap_err();
    assert!(err.to_string().contains("invalid TOML at line 1"), "{err}");
    assert_eq!(read(&path), broken);

    let odd = "[plugins]\nmcp = 3\n";
    let (_dir, path) = file(Some(odd));
    let err = add_mcp_server(&path, "git", &json!({ "command": "git-mcp" })).unwrap_err();
    assert!(err.to_string().contains("mcp"), "{err}");
    assert_eq!(read(&path), odd);
}
