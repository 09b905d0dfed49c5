//! The `memory` built-in plugin: long-term memory kept as markdown files with frontmatter.
//!
//! Memories live in one directory (`[plugins.memory] dir`, by default `~/.noeta/memories`),
//! one `<name>.md` file each, with optional YAML frontmatter (`frontmatter.rs`) read and
//! written by `store.rs`. The session pack `memory` (priority 300) mounts `memory_write`,
//! `memory_read`, `memory_search` and `memory_archive` (`tools.rs`; only the two readers
//! with `read_only = true`) and adds the `memory` extension (`index.rs`), which records the
//! memory index once per task and keeps it resident. The `memory-recall` reminder provider
//! (`recall.rs`) matches each user message against the memories (`matcher.rs`). The
//! `memory-policy` prompt fragment tells the model what to save.

mod frontmatter;
mod index;
mod matcher;
mod recall;
mod settings;
mod store;
mod tools;

use std::sync::Arc;

use noeta_core::store::{Clock, SystemClock};
use noeta_core::{
    ContentKindSpec, LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext,
    SessionPackFactory, Tool,
};

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

/// Mounts the memory tools and adds the `memory` extension, configured from `[plugins.memory]`.
struct Pack {
    clock: Arc<dyn Clock>,
}

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = settings::Settings::parse(ctx.config("memory"), std::env::home_dir())?;
        let store = Arc::new(store::Store::new(settings.dir));
        let mut pack = PackContribution::empty();
        if !settings.read_only {
            pack.tools.push(Arc::new(tools::MemoryWrite::new(
                Arc::clone(&store),
                Arc::clone(&self.clock),
            )));
        }
        let readers: [Arc<dyn Tool>; 2] = [
            Arc::new(tools::MemoryRead::new(Arc::clone(&store))),
            Arc::new(tools::MemorySearch::new(Arc::clone(&store))),
        ];
        pack.tools.extend(readers);
        if !settings.read_only {
            pack.tools
                .push(Arc::new(tools::MemoryArchive::new(Arc::clone(&store))));
        }
        pack.content_kinds.push(ContentKindSpec {
            kind: index::MEMORY_KIND.0.to_owned(),
            band: index::MEMORY_KIND.1,
            title: String::new(),
        });
        pack.extensions
            .push(Arc::new(index::MemoryIndex::new(store)));
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    plugin_with_clock(Arc::new(SystemClock))
}

/// The plugin, stamping `created` and `updated` from `clock` (tests fix the time with it).
pub fn plugin_with_clock(clock: Arc<dyn Clock>) -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("noeta_builtin_memory::MEMORY_POLICY", |_| {
                Ok(Resolved::PromptFragment(MEMORY_POLICY.to_owned()))
            })
            .with("noeta_builtin_memory::memory", move |_| {
                Ok(Resolved::SessionPack(Arc::new(Pack {
                    clock: Arc::clone(&clock),
                })))
            })
            .with("noeta_builtin_memory::recall", |_| {
                Ok(Resolved::ReminderProvider(Arc::new(recall::Recall::new(
                    settings::default_dir(std::env::home_dir()),
                ))))
            }),
    )
}
