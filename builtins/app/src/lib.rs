//! The `app` built-in plugin: app previews: serves a built web app from the workspace through the host gateway.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
