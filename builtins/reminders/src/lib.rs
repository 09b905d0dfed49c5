//! The `reminders` built-in plugin: compose-time reminders rendered from the folded task state.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
