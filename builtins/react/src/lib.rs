//! The `react` built-in plugin: the default decision loop, compaction, structured output, tool
//! search and history recall.
//!
//! What exists so far: structured output (`structured.rs`), the `structured_output` control
//! tool at schema priority 600, mounted for an agent whose settings give a schema.

mod structured;

use std::sync::Arc;

use noeta_core::{LinkedPlugin, RefTable, Resolved};

pub use structured::{MAX_NUDGES, STRUCTURED_OUTPUT, structured_result};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_react::structured_output", |_| {
            Ok(Resolved::ControlTool(Arc::new(structured::Factory)))
        }),
    )
}
