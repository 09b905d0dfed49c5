//! The `governance` built-in plugin: permissions — modes, allow and deny lists,
//! per-tool risk — budgets (`budget.rs`), the repetition guard
//! (`repetition.rs`) and command hooks (`hooks.rs`).
//!
//! Its session pack adds the `permissions` extension to every agent, and the
//! others when `[plugins.governance]` configures them. The permissions
//! extension answers every tool call in the gate:
//!
//! - a tool on the deny list is denied, whatever the mode;
//! - in `plan` mode only tools safe while planning run (the others are denied);
//! - in `bypassPermissions` everything else runs without asking;
//! - a tool on the allow list runs without asking;
//! - in `acceptEdits` the file-editing tools run without asking;
//! - otherwise a low-risk tool runs, and a medium- or high-risk one asks.
//!
//! The mode starts from the settings (`permission_mode`) and is switched with
//! `/mode <mode>`, which records the switch under `permissions`, so it
//! survives crashes and moves with the task.

mod budget;
mod hook_process;
mod hooks;
pub use hooks::{SOURCE_KEY as HOOK_SOURCE_KEY, notes as hook_notes};
mod protected;
mod repetition;
mod transcript;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{CommandReply, CommandSpec, Extension, HookError, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::records::ERASED_KIND;
use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, Risk, SessionBuildContext,
    SessionPackFactory, Verdict,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The extension's name; the mode switches are recorded under it.
const PERMISSIONS: &str = "permissions";

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Default,
    AcceptEdits,
    BypassPermissions,
    Plan,
}

impl Mode {
    const SPELLINGS: &'static str = "default, acceptEdits, bypassPermissions, plan";

    fn parse(text: &str) -> Option<Self> {
        match text {
            "default" => Some(Mode::Default),
            "acceptEdits" | "accept-edits" => Some(Mode::AcceptEdits),
            "bypassPermissions" | "bypass-permissions" => Some(Mode::BypassPermissions),
            "plan" => Some(Mode::Plan),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AcceptEdits => "acceptEdits",
            Mode::BypassPermissions => "bypassPermissions",
            Mode::Plan => "plan",
        }
    }
}

/// The plugin's settings (`[plugins.governance]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    permission_mode: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default = "default_edit_tools")]
    edit_tools: Vec<String>,
    /// Command hooks, in the shape of Claude Code's `hooks` JSON (read by `hooks::parse`).
    #[serde(default)]
    hooks: Option<Value>,
    /// Where hook commands run (default: the current directory).
    #[serde(default)]
    hooks_cwd: Option<PathBuf>,
    /// The task's caps (`budget` extension).
    #[serde(default)]
    budget: budget::Budget,
    /// The repetition guard, off unless set.
    #[serde(default)]
    repetition: Option<repetition::RepetitionGuard>,
}

fn default_edit_tools() -> Vec<String> {
    ["Edit", "Write", "MultiEdit", "NotebookEdit"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The `permissions` extension.
struct Permissions {
    start: Mode,
    allow: BTreeSet<String>,
    deny: BTreeSet<String>,
    edit_tools: BTreeSet<String>,
}

impl Permissions {
    /// The mode in force: the task's last switch, else the mode its parent handed down, else
    /// the configured one.
    fn mode(&self, view: &View<'_>) -> Mode {
        current_mode(view, self.start)
    }
}

/// The mode in force in `view`'s task: its last switch, else the mode its parent handed down,
/// else `start` (the configured one).
pub(crate) fn current_mode(view: &View<'_>, start: Mode) -> Mode {
    let recorded = |state: Option<&Value>| {
        state
            .and_then(|s| s.get("mode"))
            .and_then(Value::as_str)
            .and_then(Mode::parse)
    };
    recorded(view.ext_state(PERMISSIONS))
        .or_else(|| recorded(view.core().inherited.get(PERMISSIONS)))
        .unwrap_or(start)
}

#[async_trait]
impl Extension for Permissions {
    fn name(&self) -> &str {
        PERMISSIONS
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        let name = call.name.as_str();
        if self.deny.contains(name) {
            return Ok(Some(Verdict::Deny {
                reason: format!("`{name}` is denied by the permission settings"),
            }));
        }
        let mode = self.mode(view);
        let flags = view.find_tool(name).map(|tool| tool.flags());
        if mode == Mode::Plan && !flags.as_ref().is_some_and(|f| f.safe_while_planning) {
            return Ok(Some(Verdict::Deny {
                reason: format!(
                    "plan mode: `{name}` is not safe while planning — only reading and planning tools run; present the plan and ask the user to leave plan mode"
                ),
            }));
        }
        // What noeta trusts in the workspace: a person answers, whatever the mode short of
        // bypassing, the allow-list or a hook says.
        if mode != Mode::BypassPermissions
            && let Some(place) = view
                .workspace()
                .and_then(|workspace| protected::target(workspace, call))
        {
            return Ok(Some(Verdict::Ask {
                reason: format!(
                    "`{name}` would change `{place}` in the workspace, which decides what noeta \
                     runs and trusts — allow this change?"
                ),
                firm: true,
            }));
        }
        let allowed = mode == Mode::BypassPermissions
            || self.allow.contains(name)
            || (mode == Mode::AcceptEdits && self.edit_tools.contains(name));
        if allowed {
            return Ok(Some(Verdict::Allow { approve: true }));
        }
        match flags.map(|f| f.risk) {
            Some(Risk::Low) | None => Ok(None),
            Some(risk) => Ok(Some(Verdict::Ask {
                reason: format!(
                    "`{name}` is a {} risk tool — allow this call?",
                    if risk == Risk::High { "high" } else { "medium" }
                ),
                firm: false,
            })),
        }
    }

    /// A child task starts in its parent's mode (a parent in plan mode cannot delegate edits).
    fn inherit(&self, view: &View<'_>) -> HookResult<Option<Value>> {
        Ok(Some(json!({ "mode": self.mode(view).as_str() })))
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            "mode" => {
                let mode = data
                    .get("mode")
                    .and_then(Value::as_str)
                    .filter(|m| Mode::parse(m).is_some())
                    .ok_or_else(|| format!("a `mode` record names no mode ({data})"))?;
                *state = json!({ "mode": mode });
                Ok(())
            }
            ERASED_KIND => Ok(()),
            other => Err(format!("unknown record kind `{other}`")),
        }
    }

    fn commands(&self, _view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        Ok(vec![CommandSpec {
            name: "mode".to_owned(),
            description: format!("Show or switch the permission mode ({}).", Mode::SPELLINGS),
        }])
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        if name != "mode" {
            return Err(HookError::new(format!("unknown command `/{name}`")));
        }
        let wanted = args.trim();
        if wanted.is_empty() {
            return Ok(CommandReply::Show(format!(
                "permission mode: {}",
                self.mode(view).as_str()
            )));
        }
        let Some(mode) = Mode::parse(wanted) else {
            return Err(HookError::new(format!(
                "`{wanted}` is not a permission mode (expected one of: {})",
                Mode::SPELLINGS
            )));
        };
        view.record(PERMISSIONS, "mode", json!({ "mode": mode.as_str() }));
        Ok(CommandReply::Show(format!(
            "permission mode: {}",
            mode.as_str()
        )))
    }
}

/// Adds `permissions` to every agent's session, configured from `[plugins.governance]`.
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let config = ctx.config("governance");
        let config = if config.is_null() {
            json!({})
        } else {
            config.clone()
        };
        let settings: Settings = serde_json::from_value(config)
            .map_err(|err| format!("settings [plugins.governance]: {err}"))?;
        if let Some(guard) = &settings.repetition {
            guard.validate()?;
        }
        settings.budget.validate()?;
        let start = match settings.permission_mode.as_deref() {
            None => Mode::Default,
            Some(text) => Mode::parse(text).ok_or_else(|| {
                format!(
                    "settings [plugins.governance]: permission_mode `{text}` is not one of {}",
                    Mode::SPELLINGS
                )
            })?,
        };
        // Hook commands run where the host runs commands (a sandbox, when one is bound).
        let commands = ctx
            .host_values
            .get::<Arc<dyn noeta_core::exec::ExecEnv>>(noeta_core::exec::COMMAND_ENV)
            .cloned();
        let hooks = hooks::parse(
            settings.hooks.as_ref(),
            settings.hooks_cwd.clone(),
            start,
            commands,
        )?;
        // The order of the original's guards: budget, permissions, repetition, hooks.
        let mut pack = PackContribution::empty();
        if settings.budget.is_set() {
            pack.extensions.push(Arc::new(settings.budget));
        }
        pack.extensions.push(Arc::new(Permissions {
            start,
            allow: settings.allow.into_iter().collect(),
            deny: settings.deny.into_iter().collect(),
            edit_tools: settings.edit_tools.into_iter().collect(),
        }));
        if let Some(guard) = settings.repetition {
            pack.extensions.push(Arc::new(guard));
        }
        if let Some(hooks) = hooks {
            pack.extensions.push(Arc::new(hooks));
        }
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_governance::governance", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}
