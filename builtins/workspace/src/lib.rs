//! The `workspace` built-in plugin: the project's instructions and the environment it runs in,
//! as residents of every agent that activates it.
//!
//! Two session packs, each adding one extension:
//!
//! - `instructions` (400): the first non-empty of `NOETA.md`, `AGENTS.md`, `CLAUDE.md` at the
//!   workspace root, and the same files in subdirectories once a `Read` reaches into them
//!   (fenced to the workspace). Each file is recorded when it is first loaded or changed, so a
//!   resumed task sends the same bytes as long as the files stand.
//! - `environment` (500): platform, date, working directory and git state, recorded once per
//!   task: a resume keeps the same bytes, whatever the clock or the repository says later.
//!
//! Their residents are of content kinds `instructions` (band 300) and `environment` (band
//! 400). Both read the workspace root through `View::workspace()`: without an execution
//! environment they add nothing.

mod environment;
mod init;
mod instructions;
mod settings;

use std::sync::Arc;

use noeta_core::{
    ContentKindSpec, LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext,
    SessionPackFactory,
};

pub use environment::{EXTENSION as ENVIRONMENT, Environment};
pub use instructions::{EXTENSION as INSTRUCTIONS, INSTRUCTION_FILES, Instructions};
pub use settings::{MAX_INSTRUCTION_BYTES, Settings};

/// The plugin's name.
pub const PLUGIN: &str = "workspace";

/// The content kind of the instruction residents, and its layout band.
pub const INSTRUCTIONS_KIND: (&str, i64) = ("instructions", 300);
/// The content kind of the environment resident, and its layout band.
pub const ENVIRONMENT_KIND: (&str, i64) = ("environment", 400);

/// The content kind `(name, band)` as a pack declares it (no title).
pub fn content_kind((kind, band): (&str, i64)) -> ContentKindSpec {
    ContentKindSpec {
        kind: kind.to_owned(),
        band,
        title: String::new(),
    }
}

/// Adds the `instructions` extension.
struct InstructionsPack;

impl SessionPackFactory for InstructionsPack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        let mut pack = PackContribution::empty();
        pack.content_kinds.push(content_kind(INSTRUCTIONS_KIND));
        pack.extensions
            .push(Arc::new(Instructions::new(settings.max_instruction_bytes)));
        Ok(pack)
    }
}

/// Adds the `environment` extension.
struct EnvironmentPack;

impl SessionPackFactory for EnvironmentPack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        let mut pack = PackContribution::empty();
        pack.content_kinds.push(content_kind(ENVIRONMENT_KIND));
        pack.extensions
            .push(Arc::new(Environment::new(settings.git)));
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("noeta_builtin_workspace::instructions", |_| {
                Ok(Resolved::SessionPack(Arc::new(InstructionsPack)))
            })
            .with("noeta_builtin_workspace::environment", |_| {
                Ok(Resolved::SessionPack(Arc::new(EnvironmentPack)))
            }),
    )
}
