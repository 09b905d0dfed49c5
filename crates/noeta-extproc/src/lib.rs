//! Out-of-process extensions: plugins that bring code without rebuilding noeta.
//!
//! An on-disk plugin whose `noeta-plugin.toml` has an `[extension]` table names a program. Its
//! `session_pack` contributions carry `command:<export>` refs; when an agent activates the
//! plugin, the pack's build starts the program (one per plugin and parameters, shared by every
//! agent that uses it), performs the handshake, and gives the session the export's extension
//! (every hook the handshake lists, called over JSON-RPC on the program's stdio) and its tools.
//! The protocol is documented in `docs/plugin-protocol.md`.
//!
//! The host wires it with [`ProgramPlugins`] as the loader's
//! [`command_plugins`](noeta_core::LoadOptions::command_plugins).

mod connection;
mod extension;
pub mod protocol;
mod supervisor;
mod tool;
mod watchdog;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use noeta_core::contrib::{PackContribution, SessionBuildContext, SessionPackFactory};
use noeta_core::extension::Extension;
use noeta_core::plugin_command::{CommandPlugins, ExtensionCommand, command_export};
use noeta_core::{PluginManifest, ResolveRequest, Resolved, Resolver, Tool};
use serde_json::Value;

pub use protocol::{Export, Handshake, PROTOCOL_VERSION, ToolSpec};

use crate::supervisor::{Launch, Supervisor};

/// A hook call's deadline when the manifest sets none.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// Resolves an `[extension]` environment value (a secret reference) to the text the program
/// gets; `Err` says why it cannot.
pub type EnvResolver = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// The host's runner of plugin programs: the loader hands it every on-disk plugin with an
/// `[extension]` table.
#[derive(Clone)]
pub struct ProgramPlugins {
    env: EnvResolver,
}

impl std::fmt::Debug for ProgramPlugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramPlugins").finish_non_exhaustive()
    }
}

impl Default for ProgramPlugins {
    fn default() -> Self {
        Self::new(Arc::new(|value: &str| Ok(value.to_owned())))
    }
}

impl ProgramPlugins {
    /// A runner resolving environment values through `env`.
    pub fn new(env: EnvResolver) -> Self {
        Self { env }
    }
}

impl CommandPlugins for ProgramPlugins {
    fn resolver(&self, manifest: &PluginManifest, dir: &Path) -> Arc<dyn Resolver> {
        Arc::new(ProgramResolver {
            plugin: Arc::new(ProgramPlugin {
                name: manifest.name.clone(),
                dir: dir.to_path_buf(),
                command: manifest.extension.clone(),
                env: Arc::clone(&self.env),
                instances: Mutex::new(BTreeMap::new()),
            }),
        })
    }
}

/// One plugin with a program, and its running instances by parameters.
struct ProgramPlugin {
    name: String,
    dir: PathBuf,
    command: Option<ExtensionCommand>,
    env: EnvResolver,
    instances: Mutex<BTreeMap<String, Arc<Supervisor>>>,
}

impl ProgramPlugin {
    fn launch(&self) -> Result<Launch, String> {
        let command = self
            .command
            .as_ref()
            .ok_or("its manifest has no `[extension]` table")?;
        let env = command
            .env
            .iter()
            .map(|(key, value)| {
                (self.env)(value)
                    .map(|resolved| (key.clone(), resolved))
                    .map_err(|why| format!("`[extension] env.{key}`: {why}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Launch {
            plugin: self.name.clone(),
            dir: self.dir.clone(),
            command: command.command.clone(),
            args: command.args.clone(),
            env,
            cwd: command
                .cwd
                .as_ref()
                .map_or_else(|| self.dir.clone(), |cwd| self.dir.join(cwd)),
            hook_timeout: command
                .hook_timeout_ms
                .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_millis),
        })
    }

    /// The instance for `params`, created (not started) on first use.
    fn instance(&self, params: &Value) -> Result<Arc<Supervisor>, String> {
        let key = params.to_string();
        let mut instances = self
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = instances.get(&key) {
            return Ok(Arc::clone(found));
        }
        let supervisor = Arc::new(Supervisor::new(self.launch()?, params.clone()));
        instances.insert(key, Arc::clone(&supervisor));
        Ok(supervisor)
    }
}

struct ProgramResolver {
    plugin: Arc<ProgramPlugin>,
}

impl Resolver for ProgramResolver {
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        let Some(export) = command_export(request.reference) else {
            return Err(format!(
                "a plugin with a program resolves `command:<export>` refs only, not `{}`",
                request.reference
            ));
        };
        if request.surface != noeta_core::surface::names::SESSION_PACK {
            return Err(format!(
                "`command:` refs are session packs, not {}",
                request.surface
            ));
        }
        // Nothing starts here: the program starts when an agent's session is built.
        Ok(Resolved::SessionPack(Arc::new(ProgramPack {
            plugin: Arc::clone(&self.plugin),
            export: export.to_owned(),
        })))
    }
}

/// A `command:<export>` session pack.
struct ProgramPack {
    plugin: Arc<ProgramPlugin>,
    export: String,
}

impl SessionPackFactory for ProgramPack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let name = &self.plugin.name;
        let fail = |why: String| format!("plugin `{name}`: ref `command:{}`: {why}", self.export);
        let supervisor = self.plugin.instance(ctx.config(name)).map_err(fail)?;
        let (_, handshake) = supervisor.running().map_err(fail)?;
        let Some(export) = handshake.exports.get(&self.export) else {
            return Err(fail(format!(
                "the program's handshake lists no export `{}` (it lists: {})",
                self.export,
                handshake.export_names()
            )));
        };
        let tools: Vec<(String, Arc<dyn Tool>)> = export
            .tools
            .iter()
            .filter(|spec| ctx.allows_tool(&spec.name))
            .map(|spec| {
                let tool: Arc<dyn Tool> = Arc::new(tool::ProcessTool::new(
                    Arc::clone(&supervisor),
                    self.export.clone(),
                    spec.clone(),
                ));
                (spec.name.clone(), tool)
            })
            .collect();
        let mut pack = PackContribution::empty();
        // Tools are offered every step, unless the export's `tools` hook picks them.
        if !export.hooks.contains("tools") {
            pack.tools = tools.iter().map(|(_, tool)| Arc::clone(tool)).collect();
        }
        if !export.hooks.is_empty() {
            let extension: Arc<dyn Extension> = Arc::new(extension::ProcessExtension::new(
                Arc::clone(&supervisor),
                self.export.clone(),
                export.clone(),
                tools.into_iter().collect(),
            ));
            pack.extensions.push(extension);
        }
        Ok(pack)
    }
}

/// Starts the program of the plugin `manifest` (read from `dir`), performs the handshake, and
/// ends it: what `noeta plugins check --resolve` reports.
pub fn handshake(
    manifest: &PluginManifest,
    dir: &Path,
    params: &Value,
    env: EnvResolver,
) -> Result<Handshake, String> {
    let plugin = ProgramPlugin {
        name: manifest.name.clone(),
        dir: dir.to_path_buf(),
        command: manifest.extension.clone(),
        env,
        instances: Mutex::new(BTreeMap::new()),
    };
    let supervisor = plugin.instance(params)?;
    let (_, handshake) = supervisor.running()?;
    Ok((*handshake).clone())
}
