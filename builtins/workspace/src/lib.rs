//! The `workspace` built-in plugin: project instructions (NOETA.md, AGENTS.md, CLAUDE.md) and environment facts as residents.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
