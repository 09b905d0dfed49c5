//! The `memory` built-in plugin: long-term memory kept as markdown files with frontmatter.
//!
//! Today it contributes the memory-policy prompt fragment; the memory tools,
//! the index resident and the recall reminder provider arrive with their code.

use noeta_core::{LinkedPlugin, RefTable, Resolved};

/// What the model is told about saving memories.
pub(crate) const MEMORY_POLICY: &str = "\
# Memory

You have a long-term memory that outlives this conversation. Save to it only \
what will still be true and useful in a later task: the user's stated \
preferences and working style, decisions about this project and the reasons \
behind them, and procedures that took real effort to work out. Do not save \
what the code, the git history or the project's own documents already record, \
what only matters for the task at hand, guesses you have not confirmed, or \
secrets of any kind. Before writing, search for a memory on the same subject \
and update it instead of adding a near-duplicate. When a memory turns out to \
be wrong or stale, correct or archive it.";

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_memory::MEMORY_POLICY", |_| {
            Ok(Resolved::PromptFragment(MEMORY_POLICY.to_owned()))
        }),
    )
}
