//! The `ask_user_question` built-in plugin: structured questions to the user, answered interactively or parked until answered.

use noeta_core::{LinkedPlugin, RefTable};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
