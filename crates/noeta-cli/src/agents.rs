//! `noeta agents list`: every agent a run or `Task` may start — `main`, the plugins' agents
//! (the presets), the agent files — with where it is defined, its tools, or why it cannot be
//! used; and each agent file that does not load.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use noeta::{Host, HostPaths};
use noeta_core::provider::ScriptedProvider;
use noeta_core::store::TaskId;
use serde_json::{Value, json};

use crate::agent::{self, AgentArgs};
use crate::stdio::outln;

/// One row of the listing.
pub(crate) struct Row {
    pub(crate) name: String,
    /// `preset`, `plugin`, `agent file`.
    kind: &'static str,
    /// The plugin, or the file.
    source: String,
    pub(crate) description: String,
    tools: Vec<String>,
    /// Tools an agent file names that nothing offers (Claude Code's `LS`, …): left out.
    unknown_tools: Vec<String>,
    pub(crate) error: Option<String>,
}

/// The agents to list, without their tools yet.
pub(crate) fn rows(host: &Host) -> Vec<Row> {
    let mut rows = vec![Row {
        name: "main".to_owned(),
        kind: "preset",
        source: "presets".to_owned(),
        description: "the default agent".to_owned(),
        tools: Vec::new(),
        unknown_tools: Vec::new(),
        error: None,
    }];
    let files = host.agent_files();
    for entry in host.merged().for_surface("agent") {
        let name = &entry.contribution.name;
        if name.starts_with("__") || name == "main" || files.iter().any(|f| &f.name == name) {
            continue;
        }
        let description = match host
            .plugins()
            .resolve_contribution(&entry.plugin, "agent", name)
        {
            Ok(noeta_core::Resolved::Agent(def)) => def.description.clone(),
            _ => String::new(),
        };
        rows.push(Row {
            name: name.clone(),
            kind: if entry.plugin == "presets" {
                "preset"
            } else {
                "plugin"
            },
            source: entry.plugin.clone(),
            description,
            tools: Vec::new(),
            unknown_tools: Vec::new(),
            error: None,
        });
    }
    for file in files {
        rows.push(Row {
            name: file.name.clone(),
            kind: "agent file",
            source: file.path.display().to_string(),
            description: file.description.clone().unwrap_or_default(),
            tools: Vec::new(),
            unknown_tools: Vec::new(),
            error: None,
        });
    }
    for (path, err) in host.agent_file_problems() {
        rows.push(Row {
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind: "agent file",
            source: path.display().to_string(),
            description: String::new(),
            tools: Vec::new(),
            unknown_tools: Vec::new(),
            error: Some(err.to_string()),
        });
    }
    rows
}

/// `text` on one line, cut to `max` characters with `…`.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `noeta agents list [--json]`.
pub(crate) fn list(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    let args = AgentArgs {
        plugin_dirs,
        ..AgentArgs::default()
    };
    // A listing starts no MCP server (they run commands, pull images, download packages):
    // their tools are not listed.
    let host = Host::open(noeta::HostConfig {
        start_mcp_servers: false,
        ..agent::config(paths, &args)?
    })?;
    let mut rows = rows(&host);
    // Each agent's tools as a new task of it is offered them, on a scratch store and no model.
    let stores = host.open_store(Some("memory:"))?;
    let model = ScriptedProvider::from_json(r#"{"turns": []}"#, "agents list")?;
    let runtime = host.runtime(&stores, Arc::new(model));
    let scratch = TaskId::new("agents-list")?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for row in rows.iter_mut().filter(|r| r.error.is_none()) {
        match host.session(&row.name) {
            Ok(session) => match tokio.block_on(runtime.direct_tools(&session, &scratch)) {
                Ok(tools) => {
                    row.tools = tools.iter().map(|t| t.name().to_owned()).collect();
                    if let Some(named) = host
                        .agent_files()
                        .iter()
                        .find(|f| f.name == row.name)
                        .and_then(|f| f.tools.as_ref())
                    {
                        row.unknown_tools = agent::unoffered(named, &tools);
                    }
                }
                Err(err) => row.error = Some(err.to_string()),
            },
            Err(err) => row.error = Some(err.to_string()),
        }
    }
    for row in &rows {
        if json_out {
            let mut object = json!({
                "name": row.name,
                "kind": row.kind,
                "source": row.source,
                "description": row.description,
                "tools": row.tools,
                "unknown_tools": row.unknown_tools,
                "error": row.error,
            });
            if row.error.is_some() {
                object["tools"] = Value::Null;
            }
            outln!("{object}");
            continue;
        }
        outln!("{}  ({}: {})", row.name, row.kind, row.source);
        if !row.description.is_empty() {
            outln!("  {}", one_line(&row.description, 160));
        }
        match &row.error {
            Some(err) => outln!("  error: {err}"),
            None => outln!("  tools: {}", row.tools.join(", ")),
        }
        if !row.unknown_tools.is_empty() {
            outln!(
                "  not offered by any plugin, left out: {}",
                row.unknown_tools.join(", ")
            );
        }
    }
    Ok(if rows.iter().any(|r| r.error.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
