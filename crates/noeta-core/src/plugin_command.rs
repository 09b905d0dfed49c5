//! Plugin files that bring code: the manifest's `[extension]` table, `command:<export>` refs, and
//! the seam through which a host attaches the resolver that runs such a plugin's program.
//!
//! The kernel only reads the table and checks the refs; it starts nothing. A host that speaks
//! the out-of-process extension protocol sets [`crate::LoadOptions::command_plugins`], and the
//! loader hands it every on-disk plugin with an `[extension]` table; the resolver it returns
//! must stay lazy too (the loader runs no plugin code — an agent activating the plugin does).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::loader::Resolver;
use crate::manifest::PluginManifest;

/// The prefix of a ref naming an export of the plugin's program.
pub const COMMAND_REF_PREFIX: &str = "command:";

/// The export a `command:<export>` ref names; `None` for any other ref.
pub fn command_export(reference: &str) -> Option<&str> {
    reference.strip_prefix(COMMAND_REF_PREFIX).map(str::trim)
}

/// `[extension]`: the program an on-disk plugin's code runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtensionCommand {
    /// The program: a name looked up on `PATH`, or a path relative to the plugin directory.
    pub command: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to its environment (values may be secret references).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working directory, relative to the plugin directory (the plugin directory when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// How long one hook call may take before it counts as failed, in milliseconds.
    #[serde(rename = "hook-timeout-ms", skip_serializing_if = "Option::is_none")]
    pub hook_timeout_ms: Option<u64>,
}

/// The fields `[extension]` may have.
const FIELDS: [&str; 5] = ["command", "args", "env", "cwd", "hook-timeout-ms"];

/// Parses the `[extension]` table; `Err` is the problem, for the manifest's field error.
pub(crate) fn parse_extension(value: &toml::Value) -> Result<ExtensionCommand, String> {
    let Some(table) = value.as_table() else {
        return Err("must be a table".to_owned());
    };
    if let Some(unknown) = table
        .keys()
        .find(|k| !FIELDS.contains(&k.replace('_', "-").as_str()))
    {
        return Err(format!(
            "has unknown key `{unknown}` (known: {})",
            FIELDS.join(", ")
        ));
    }
    let command = match table.get("command") {
        Some(toml::Value::String(c)) if !c.trim().is_empty() => c.trim().to_owned(),
        Some(_) => return Err("`command` must be a non-empty string".to_owned()),
        None => return Err("is missing `command` (the program to run)".to_owned()),
    };
    let args = match table.get("args") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("`args` must be a list of strings")?,
        Some(_) => return Err("`args` must be a list of strings".to_owned()),
    };
    let env = match table.get("env") {
        None => BTreeMap::new(),
        Some(toml::Value::Table(vars)) => vars
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(text) => Ok((k.clone(), text.to_owned())),
                None => Err(format!("`env.{k}` must be a string")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`env` must be a table of strings".to_owned()),
    };
    let cwd = match table.get("cwd") {
        None => None,
        Some(toml::Value::String(dir)) if Path::new(dir).is_relative() => Some(dir.clone()),
        Some(toml::Value::String(dir)) => {
            return Err(format!(
                "`cwd` `{dir}` must be relative to the plugin directory"
            ));
        }
        Some(_) => return Err("`cwd` must be a string".to_owned()),
    };
    let hook_timeout_ms = match table
        .get("hook-timeout-ms")
        .or_else(|| table.get("hook_timeout_ms"))
    {
        None => None,
        Some(toml::Value::Integer(ms)) if *ms > 0 => Some(ms.unsigned_abs()),
        Some(_) => return Err("`hook-timeout-ms` must be a positive integer".to_owned()),
    };
    Ok(ExtensionCommand {
        command,
        args,
        env,
        cwd,
        hook_timeout_ms,
    })
}

/// What a host that runs plugin programs gives the loader: the resolver of one on-disk plugin
/// with an `[extension]` table. It must start nothing until a ref is resolved.
pub trait CommandPlugins: Send + Sync {
    /// The resolver of the plugin `manifest` read from the directory `dir`.
    fn resolver(&self, manifest: &PluginManifest, dir: &Path) -> Arc<dyn Resolver>;
}
