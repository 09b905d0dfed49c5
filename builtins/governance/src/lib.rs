//! The `governance` built-in plugin: permissions (modes, allow and deny lists, plan mode), Claude Code-style command hooks, budgets and the repetition guard.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
