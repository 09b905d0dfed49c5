//! The `mcp` built-in plugin: MCP servers over stdio and streamable HTTP, their tools mounted
//! as `mcp__<alias>__<tool>`.
//!
//! Its session pack (`mcp`, band 800) reads `[plugins.mcp]` (`settings.rs`) and adds one
//! extension, `mcp`, holding the session's connections (`hub.rs`). The servers start in the
//! background — at a turn's intake, or the first offer of a resumed task; the first offer waits
//! for them at most `startup_wait_ms`, and a server up later has its tools join deferred —
//! and each listed tool is offered as a [`tool::McpTool`] (`tool.rs`): the server's own
//! description and schema, named `mcp__<alias>__<tool>` (shortened with a hash past the
//! providers' 64 characters), its result turned into text and attachments. A server that
//! fails fails only the calls to it, and is started again on the next call.
//!
//! A `type = "host"` server's endpoint comes from the embedding host's [`RemoteResolver`] at
//! every turn (`remote.rs`), never from settings.
//!
//! A plugin's in-process server (the `mcp_server` surface) goes through the same client over an
//! in-memory transport: [`in_process_server`] (`in_process.rs`) makes the contribution's value.

mod connect;
mod elicit;
mod http;
mod hub;
mod in_process;
mod prompts;
mod remote;
mod resources;
mod settings;
mod sign_in;
mod tokens;
mod tool;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use noeta_core::extension::{CommandReply, CommandSpec, Extension, HookError, HookResult, View};
use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext, SessionPackFactory,
    Tool,
};

pub use elicit::{ELICITOR, Elicited, Elicitor, defaults as elicitation_defaults, elicitor_value};
pub use in_process::{InProcess, in_process_server};
pub use remote::{RESOLVER, Remote, RemoteResolver, host_value};
pub use resources::{LIST_RESOURCES, READ_RESOURCE};
pub use settings::{
    CALL_TIMEOUT_MS, DEFER_ABOVE, PLUGIN, STARTUP_TIMEOUT_MS, STARTUP_WAIT_MS, Server, Settings,
    Transport,
};
pub use sign_in::{SignIn, SignedIn, sign_in, sign_out};
pub use tokens::{FileVault, TOKENS, TokenVault, tokens_value};

/// The host value that keeps a session's servers from starting (a listing, such as `noeta
/// agents list`): its MCP tools are not offered. Set it with [`no_start_value`].
pub const NO_START: &str = "noeta_builtin_mcp::no_start";

/// The value to set under [`NO_START`].
pub fn no_start_value() -> noeta_core::HostValue {
    noeta_core::HostValue::new(NoStart)
}

/// The marker under [`NO_START`].
#[derive(Debug, Clone, Copy)]
pub struct NoStart;
pub use tool::{MAX_NAME_LEN, tool_name};

/// A server as [`Mcp::connect`] reports it: its tools' model-visible names, or why it is down.
pub type ServerStatus = Result<Vec<String>, String>;

/// The extension holding a session's MCP connections and offering their tools.
pub struct Mcp {
    hub: Arc<hub::Hub>,
    /// How long the first offer waits for servers still starting.
    startup_wait: std::time::Duration,
    /// A listing: no server is started, and no MCP tool offered.
    no_start: bool,
    /// The mounted tools by name, kept so an unchanged list offers the same tools.
    mounted: Mutex<BTreeMap<String, Arc<dyn Tool>>>,
}

impl std::fmt::Debug for Mcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mcp")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

impl Mcp {
    /// The extension over `settings`' servers (none is started yet).
    pub fn new(settings: Settings) -> Self {
        Self::with_resolver(settings, None)
    }

    /// The extension over `settings`' servers, asking `resolver` at every turn for the
    /// endpoints of the `type = "host"` ones.
    pub fn with_resolver(settings: Settings, resolver: Option<Arc<dyn RemoteResolver>>) -> Self {
        Self::with_host(settings, resolver, None, None)
    }

    /// The extension over `settings`' servers, with the host's resolver of `type = "host"`
    /// servers, the host's [`Elicitor`], who answers the servers' requests for input (without
    /// one they are declined), and the host's [`TokenVault`], where sign-ins to remote servers
    /// are kept (without one no token is sent).
    pub fn with_host(
        settings: Settings,
        resolver: Option<Arc<dyn RemoteResolver>>,
        elicitor: Option<Arc<dyn Elicitor>>,
        tokens: Option<Arc<dyn TokenVault>>,
    ) -> Self {
        Self {
            hub: Arc::new(hub::Hub::new(
                settings.servers,
                settings.defer_above,
                resolver,
                elicitor,
                tokens,
            )),
            startup_wait: settings.startup_wait,
            no_start: false,
            mounted: Mutex::new(BTreeMap::new()),
        }
    }

    /// The same, starting no server and offering no MCP tool (for listings).
    #[must_use]
    pub fn never_starting(mut self) -> Self {
        self.no_start = true;
        self
    }

    /// The `WWW-Authenticate` challenge server `alias` last refused the client with, when its
    /// last refusal (at start or on a call) was for want of sign-in or of scope: what a
    /// sign-in ([`sign_in`]) starts from.
    pub fn sign_in_challenge(&self, alias: &str) -> Option<String> {
        self.hub.challenge(alias)
    }

    /// Starts every server not started yet, and those that failed when their back-off has
    /// passed; then each server's state: its tools' model-visible names, or why it is down
    /// (for `noeta mcp list` and `doctor`).
    pub async fn connect(&self) -> Vec<(String, ServerStatus)> {
        if let Err(err) = self.hub.start(true).await {
            return vec![("(all)".to_owned(), Err(err))];
        }
        self.hub
            .status()
            .into_iter()
            .map(|(alias, state)| {
                let state = match state {
                    Some(Ok(tools)) => Ok(tools
                        .iter()
                        .map(|t| tool_name(&t.alias, &t.remote))
                        .collect()),
                    Some(Err(err)) => Err(err),
                    None => Err("not started".to_owned()),
                };
                (alias, state)
            })
            .collect()
    }
}

#[async_trait]
impl Extension for Mcp {
    fn name(&self) -> &str {
        PLUGIN
    }

    /// A new turn starts the servers not started yet (and retries failed ones) in the
    /// background: the turn never waits here.
    async fn turn_intake(&self, _view: &View<'_>, _message: &str) -> HookResult<()> {
        if !self.no_start {
            // A server that fails is reported with its tools missing; the turn goes on.
            self.hub.start_in_background(true);
        }
        Ok(())
    }

    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        if self.hub.is_empty() || self.no_start {
            return Ok(Vec::new());
        }
        // The first offer waits a moment for servers still starting; later ones never wait.
        self.hub.before_offer(self.startup_wait);
        let mut mounted = self.mounted.lock().unwrap_or_else(PoisonError::into_inner);
        let mut offered = Vec::new();
        let mut seen = BTreeMap::new();
        for listed in self.hub.tools() {
            let name = tool_name(&listed.alias, &listed.remote);
            let tool = match mounted.get(&name) {
                Some(tool)
                    if tool.description() == listed.description
                        && tool.flags().deferred == listed.deferred =>
                {
                    tool.clone()
                }
                _ => {
                    let tool: Arc<dyn Tool> =
                        Arc::new(tool::McpTool::new(self.hub.clone(), listed));
                    mounted.insert(name.clone(), tool.clone());
                    tool
                }
            };
            // Two tools of one server cleaned to the same name: the first is offered.
            if seen.insert(name, ()).is_none() {
                offered.push(tool);
            }
        }
        // The resource tools, while some server lists resources.
        if !self.hub.resources().is_empty() {
            for name in [resources::LIST_RESOURCES, resources::READ_RESOURCE] {
                let tool = mounted
                    .entry(name.to_owned())
                    .or_insert_with(|| -> Arc<dyn Tool> {
                        if name == resources::LIST_RESOURCES {
                            Arc::new(resources::ListResources(self.hub.clone()))
                        } else {
                            Arc::new(resources::ReadResource(self.hub.clone()))
                        }
                    })
                    .clone();
                offered.push(tool);
            }
        }
        Ok(offered)
    }

    /// The servers' prompts, as `/mcp__<alias>__<prompt>` (starting servers never tried, as
    /// a first offer does).
    fn commands(&self, _view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        if self.hub.is_empty() || self.no_start {
            return Ok(Vec::new());
        }
        self.hub.before_offer(self.startup_wait);
        Ok(prompts::commands(&self.hub))
    }

    async fn run_command(
        &self,
        _view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        let prompt = prompts::find(&self.hub, name)
            .ok_or_else(|| HookError::new(format!("unknown command `/{name}`")))?;
        let arguments = prompts::arguments(&prompt, args).map_err(HookError::new)?;
        let result = self
            .hub
            .get_prompt(&prompt.alias, &prompt.name, arguments)
            .await
            .map_err(HookError::new)?;
        let text = prompts::message_text(&result);
        if text.trim().is_empty() {
            return Err(HookError::new(format!(
                "mcp server `{}`: prompt `{}` gave no text",
                prompt.alias, prompt.name
            )));
        }
        Ok(CommandReply::Send(text))
    }
}

/// Reads the settings and adds the extension (nothing at all without servers).
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        // One alias namespace with the plugins' in-process servers (seed 000): no override.
        for server in &settings.servers {
            if let Some((_, plugin)) = ctx.mcp_servers.iter().find(|(a, _)| *a == server.alias) {
                return Err(format!(
                    "mcp server alias `{alias}` is taken twice: by plugin `{plugin}`'s in-process \
                     server (its `mcp_server` contribution `{alias}`) and by \
                     [plugins.mcp.servers.{alias}] in the settings or a `.mcp.json`; rename one \
                     (there is no override)",
                    alias = server.alias
                ));
            }
        }
        let mut pack = PackContribution::empty();
        if !settings.servers.is_empty() {
            let resolver = remote::from_host(&ctx.host_values);
            let elicitor = elicit::from_host(&ctx.host_values);
            let tokens = tokens::from_host(&ctx.host_values);
            let mut mcp = Mcp::with_host(settings, resolver, elicitor, tokens);
            if ctx.host_values.get::<NoStart>(NO_START).is_some() {
                mcp = mcp.never_starting();
            }
            pack.extensions.push(Arc::new(mcp));
        }
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_mcp::mcp", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}
