//! The `skills` built-in plugin: SKILL.md packs from nine tiers, the skill listing, the `skill`
//! control tool, `allowed-tools` enforcement and `run_skill_script`.
//!
//! - Session pack `skills` (600) adds the `skills` extension, and `run_skill_script` when
//!   `allow_skill_scripts` is set. The extension indexes the tiers (on the first claim and at
//!   each user message), records the index when it changed, lists the skills the model may
//!   activate as a resident fitted to a token budget, withholds `skill` while nothing can be
//!   activated and `run_skill_script` while no active skill ships scripts, and gates calls:
//!   `allowed-tools` of the active skills (off / deny / approve), and an ask before every script.
//! - Control tool `skill` (400) activates a skill by name: it returns the SKILL.md body and
//!   records the activation with the file's SHA-256, so a resume folds it back. Activations
//!   last until the next user message.
//!
//! Tiers, lowest precedence first: built-in (none today), plugin-contributed (the `skills`
//! surface), `extra_skill_dirs`, `~/.agents/skills`, `~/.claude/skills` and `~/.noeta/skills`
//! (all opt-in), the workspace's `.agents/skills`, `.claude/skills` and `.noeta/skills` (or the
//! `skills_dir` override instead of them). [`listing::index_for_listing`] indexes them as a session would, for `noeta skills list`.

mod commands;
mod extension;
mod frontmatter;
mod index;
pub mod listing;
mod menu;
mod read_only;
mod settings;
mod tools;

use std::sync::Arc;

use noeta_core::{
    ContentKindSpec, ControlToolFactory, ControlToolMount, LinkedPlugin, PackContribution,
    RefTable, Resolved, SessionBuildContext, SessionPackFactory,
};

use crate::settings::Settings;

/// The plugin's name, and its settings table (`[plugins.skills]`).
pub const PLUGIN: &str = "skills";

/// The content kind of the skill listing resident, and its layout band.
pub const LISTING_KIND: (&str, i64) = ("skill_listing", 110);

/// Adds the `skills` extension (and `run_skill_script` when scripts are allowed).
struct SkillsPack;

impl SessionPackFactory for SkillsPack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        // A relative plugin path is refused here, naming the plugin, before any session runs.
        index::check_plugin_dirs(&ctx.skills_dirs)?;
        let mut pack = PackContribution::empty();
        pack.content_kinds.push(ContentKindSpec {
            kind: LISTING_KIND.0.to_owned(),
            band: LISTING_KIND.1,
            title: String::new(),
        });
        if settings.allow_skill_scripts {
            pack.tools
                .push(Arc::new(tools::RunSkillScript::new(&settings)));
        }
        // The plugin tier: the `skills` contributions here, Claude Code plugins' directories
        // from the settings the host adds (`plugin_skill_dirs`, namespaced by the index).
        let plugin_commands = settings.plugin_command_dirs.clone();
        pack.extensions.push(extension::extension(
            settings,
            std::env::home_dir(),
            ctx.skills_dirs.clone(),
        ));
        // Markdown commands (`commands/*.md`), `/name args` in chat and `noeta run`.
        pack.extensions
            .push(Arc::new(commands::MarkdownCommands::new(
                std::env::home_dir(),
                plugin_commands,
            )));
        Ok(pack)
    }
}

/// Mounts the `skill` control tool.
struct SkillControl;

impl ControlToolFactory for SkillControl {
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        Ok(Some(ControlToolMount::new(Arc::new(
            tools::SkillTool::new(&settings),
        ))))
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("noeta_builtin_skills::skills", |_| {
                Ok(Resolved::SessionPack(Arc::new(SkillsPack)))
            })
            .with("noeta_builtin_skills::skill", |_| {
                Ok(Resolved::ControlTool(Arc::new(SkillControl)))
            }),
    )
}
