//! The `react` built-in plugin: the default decision loop, compaction, structured output, tool
//! search and history recall.
//!
//! - `policy.rs`: the default decision loop [`ReactPolicy`] (`react` `1`). It is no
//!   `policy` contribution: the host passes [`default_policy`] to the session
//!   build, so any activated policy plugin replaces it.
//! - `compaction.rs`: the `compaction` extension, summarising the older part of
//!   the conversation when a request nears the context window.
//! - `recall.rs`: the `RecallHistory` control tool (550) and the
//!   `collapsed-context` reminder (350).
//! - `structured.rs`: the `structured_output` control tool (600), mounted for an
//!   agent whose settings give a schema.
//! - `search.rs`: the `tool_search` extension and `ToolSearch`.

mod compact_now;
mod compaction;
mod policy;
mod recall;
mod search;
mod structured;

use std::sync::Arc;

use noeta_core::policy::Policy;
use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext, SessionPackFactory,
};

pub use policy::{CONTINUE, EMPTY_NUDGE, LOOP, MAX_CONTINUATIONS, ReactPolicy, policy_ref};
pub use recall::{MAX_LIMIT as RECALL_MAX_LIMIT, RECALL_HISTORY};
pub use search::TOOL_SEARCH;
pub use structured::{MAX_NUDGES, STRUCTURED_OUTPUT, structured_result};

/// The default decision loop, for the host to hand to the session build.
pub fn default_policy() -> Arc<dyn Policy> {
    Arc::new(ReactPolicy)
}

/// Adds the `tool_search` and `compaction` extensions to every agent, and the loop's own hooks
/// to the agents the loop runs.
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = compaction::Settings::from_context(ctx)?;
        let mut pack = PackContribution::empty();
        if ctx.policy == policy_ref() {
            pack.extensions.push(Arc::new(policy::Loop));
        }
        pack.extensions.push(Arc::new(search::Search::default()));
        if settings.enabled() {
            pack.extensions
                .push(Arc::new(compaction::Compaction::new(settings)));
        }
        Ok(pack)
    }

    /// The decision loop joins only agents that run under `react`'s policy.
    fn reads_agent(&self) -> bool {
        true
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("noeta_builtin_react::structured_output", |_| {
                Ok(Resolved::ControlTool(Arc::new(structured::Factory)))
            })
            .with("noeta_builtin_react::recall_history", |_| {
                Ok(Resolved::ControlTool(Arc::new(recall::Factory)))
            })
            .with("noeta_builtin_react::collapsed_context", |_| {
                Ok(Resolved::Reminder(Arc::new(recall::CollapsedContext)))
            })
            .with("noeta_builtin_react::react", |_| {
                Ok(Resolved::SessionPack(Arc::new(Pack)))
            }),
    )
}
