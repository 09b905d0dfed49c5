//! The `react` built-in plugin: the default decision loop, compaction, structured output, tool
//! search and history recall.
//!
//! What exists so far: structured output (`structured.rs`), the `structured_output` control
//! tool at schema priority 600, mounted for an agent whose settings give a schema; and tool
//! search (`search.rs`), the `tool_search` extension its session pack adds to every agent.

mod search;
mod structured;

use std::sync::Arc;

use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext, SessionPackFactory,
};

pub use search::TOOL_SEARCH;
pub use structured::{MAX_NUDGES, STRUCTURED_OUTPUT, structured_result};

/// Adds the `tool_search` extension to every agent.
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, _ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let mut pack = PackContribution::empty();
        pack.extensions.push(Arc::new(search::Search::default()));
        Ok(pack)
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
            .with("noeta_builtin_react::react", |_| {
                Ok(Resolved::SessionPack(Arc::new(Pack)))
            }),
    )
}
