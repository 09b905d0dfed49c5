//! The `fs` built-in plugin: the agent's hands: file tools and the shell, fenced to the workspace.
//!
//! Its session pack (`fs`, priority 100) mounts `Read`, `Glob`, `Grep`, `Edit`, `Write` and
//! (unless `shell_mode = "off"`) `Bash` (`bash.rs`) with its background-shell tools
//! `BashOutput` and `KillShell` (`jobs.rs`) and `Monitor` (`monitor.rs`), and adds the `fs`
//! extension, which also streams monitored shells' output (and, with
//! `background_ends_with_turn`, kills the task's background shells when its turn ends). Every
//! path resolves against the workspace root of the runner's execution environment
//! (`ctx.exec_env()`), or, for the five file tools, inside one of the `write_roots`; a path
//! outside them, or a symlink inside them pointing outside, is refused. `Read` records each
//! file's SHA-256 digest under `fs`; the extension folds those records into the read registry,
//! and `Edit` and `Write` refuse to change a file that was never read or that changed since it
//! was read. Whether they write is the `write_mode` setting: `dry_run` (the default) only shows
//! what would change. `Read` renders Jupyter notebooks (`notebook.rs`).

mod bash;
mod edit;
mod glob;
mod grep;
mod jobs;
mod monitor;
mod notebook;
mod paths;
mod ranged;
mod read;
mod registry;
mod settings;

use std::sync::Arc;

use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext, SessionPackFactory,
    Tool,
};

/// Adds the `fs` extension and mounts the file tools, configured from `[plugins.fs]`.
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Arc::new(settings::Settings::parse(ctx.config("fs"))?);
        let mut pack = PackContribution::empty();
        let jobs = Arc::new(jobs::Jobs::default());
        pack.extensions.push(Arc::new(registry::FsState::new(
            Arc::clone(&jobs),
            settings.shell.ends_with_turn,
        )));
        let tools: [Arc<dyn Tool>; 5] = [
            Arc::new(read::Read::new(Arc::clone(&settings))),
            Arc::new(glob::Glob::new(Arc::clone(&settings))),
            Arc::new(grep::Grep::new(Arc::clone(&settings))),
            Arc::new(edit::Edit::new(Arc::clone(&settings))),
            Arc::new(edit::Write::new(Arc::clone(&settings))),
        ];
        pack.tools.extend(tools);
        if settings.shell.mode != bash::ShellMode::Off {
            let shell = Arc::new(settings.shell.clone());
            let shell_tools: [Arc<dyn Tool>; 4] = [
                Arc::new(bash::Bash::new(Arc::clone(&shell), Arc::clone(&jobs))),
                Arc::new(jobs::BashOutput::new(Arc::clone(&jobs))),
                Arc::new(jobs::KillShell::new(Arc::clone(&jobs))),
                Arc::new(monitor::Monitor::new(shell, jobs)),
            ];
            pack.tools.extend(shell_tools);
        }
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_fs::fs", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}
