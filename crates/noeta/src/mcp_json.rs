//! Claude Code's `.mcp.json`: MCP servers a user (`~/.noeta/.mcp.json`) or a trusted workspace
//! (`<workspace>/.mcp.json`) declares, handed to the `mcp` plugin as servers beneath the ones
//! the settings name.
//!
//! Both shapes Claude Code writes are read: `{"mcpServers": {alias: server}}` and a bare
//! `{alias: server}`. A server has `command`/`args`/`env` or `type` (`http`)/`url`/`headers`;
//! `${VAR}` and `${VAR:-default}` in those strings are expanded from the environment, as Claude
//! Code does. A workspace's file is read only when the workspace is trusted (`noeta trust`): a
//! cloned repository never starts a server by itself.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::conventions::HostPaths;

/// The largest `.mcp.json` read.
const MAX_BYTES: u64 = 1024 * 1024;

/// The keys of a server that are passed on; `type` is checked by the plugin.
const KEYS: &[&str] = &["type", "command", "args", "env", "url", "headers", "cwd"];

/// The servers of the user's and (when trusted) the workspace's `.mcp.json`, the workspace's
/// winning for an alias both name; with a line for each file or entry that could not be used
/// and each key that was ignored.
pub fn servers(paths: &HostPaths) -> (Map<String, Value>, Vec<String>) {
    let mut servers = Map::new();
    let mut warnings = Vec::new();
    let mut files: Vec<PathBuf> = paths
        .user_dir()
        .map(|d| d.join(".mcp.json"))
        .into_iter()
        .collect();
    let workspace_file = paths.workspace.join(".mcp.json");
    if workspace_file.is_file() {
        let trust = crate::ProjectTrust::of(paths);
        if trust.is_trusted() {
            files.push(workspace_file);
        } else {
            warnings.push(trust.not_read(
                &workspace_file.display().to_string(),
                "",
                "starts a server",
            ));
        }
    }
    for file in files {
        match read(&file, &|name| std::env::var(name).ok()) {
            Ok((found, ignored)) => {
                servers.extend(found);
                warnings.extend(ignored);
            }
            Err(problem) => warnings.push(problem),
        }
    }
    (servers, warnings)
}

/// The servers of one `.mcp.json` (none when it does not exist), and the keys it ignored.
pub fn read(
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    let shown = file.display();
    let text = match noeta_core::manifest::read_capped(file, MAX_BYTES) {
        Ok(Ok(text)) => text,
        Ok(Err(size)) => {
            return Err(format!(
                "{shown}: {size} bytes, over the {MAX_BYTES}-byte limit of an `.mcp.json`"
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Map::new(), Vec::new()));
        }
        Err(e) => return Err(format!("{shown}: cannot be read: {e}")),
    };
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{shown}: not valid JSON: {e}"))?;
    servers_in(json, &shown.to_string(), env)
}

/// The servers of an `.mcp.json`'s JSON (either shape), read as [`read`] reads a file;
/// `shown` names where it comes from in problems.
pub fn servers_in(
    json: Value,
    shown: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    let Value::Object(top) = json else {
        return Err(format!("{shown}: expected a JSON object of servers"));
    };
    let table = match top.get("mcpServers") {
        Some(Value::Object(servers)) => servers.clone(),
        Some(other) => {
            return Err(format!(
                "{shown}: `mcpServers` must be an object, got `{other}`"
            ));
        }
        None => top,
    };
    let mut servers = Map::new();
    let mut ignored = Vec::new();
    for (alias, server) in table {
        let Value::Object(server) = server else {
            return Err(format!(
                "{shown}: server `{alias}` must be an object, got `{server}`"
            ));
        };
        let mut kept = Map::new();
        let mut unset = std::collections::BTreeSet::new();
        for (key, value) in server {
            if KEYS.contains(&key.as_str()) {
                kept.insert(key.clone(), expand(&value, env, &mut unset));
            } else {
                ignored.push(format!(
                    "{shown}: server `{alias}`: key `{key}` is not used"
                ));
            }
        }
        for name in unset {
            ignored.push(format!(
                "{shown}: server `{alias}`: `${{{name}}}` is not set, so it expands to nothing; \
                 set {name}, or give a default with `${{{name}:-value}}`"
            ));
        }
        servers.insert(alias, Value::Object(kept));
    }
    Ok((servers, ignored))
}

/// `value` with `${VAR}` and `${VAR:-default}` expanded in every string (an unset variable
/// without a default expands to nothing, and is added to `unset`).
fn expand(
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
    unset: &mut std::collections::BTreeSet<String>,
) -> Value {
    match value {
        Value::String(text) => Value::String(expand_text(text, env, unset)),
        Value::Array(items) => Value::Array(items.iter().map(|v| expand(v, env, unset)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand(v, env, unset)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn expand_text(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    unset: &mut std::collections::BTreeSet<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match env(name).filter(|v| !v.is_empty() || default.is_none()) {
            Some(value) => out.push_str(&value),
            None => {
                if default.is_none() {
                    unset.insert(name.to_owned());
                }
                out.push_str(default.unwrap_or_default());
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}
