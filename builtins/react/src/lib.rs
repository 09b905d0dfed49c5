//! The `react` built-in plugin: the default decision loop, compaction, structured output, tool search and history recall.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
