//! `noeta store check` and `noeta store salvage`: the store file checked row by row, and what is
//! readable of a damaged one copied into a new file; and the `.noeta/.gitignore` the first run
//! that makes the store writes.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use noeta::HostPaths;
use serde_json::json;

use crate::stdio::{eoutln, outln};

/// `noeta store check [--store URL] [--json]`: exit 0 when the store is sound, 1 when it is damaged.
pub(crate) fn check(paths: &HostPaths, store: Option<&str>, json_out: bool) -> Result<ExitCode> {
    let file = noeta::store_file(paths, store)?;
    if !file.exists() {
        anyhow::bail!(
            "there is no store file `{}` to check (a store is created by the first run)",
            file.display()
        );
    }
    let check = noeta::backends::check_store(&file)?;
    if json_out {
        outln!(
            "{}",
            json!({
                "store": file.display().to_string(),
                "sound": check.problems.is_empty(),
                "tasks": check.tasks,
                "events": check.events,
                "bodies": check.bodies,
                "problems": check.problems,
            })
        );
    } else {
        let counts = format!(
            "{} task(s), {} event(s), {} content bod{}",
            check.tasks,
            check.events,
            check.bodies,
            if check.bodies == 1 { "y" } else { "ies" }
        );
        if check.problems.is_empty() {
            outln!("store {} is sound: {counts}", file.display());
        } else {
            outln!("store {} is damaged ({counts} readable):", file.display());
            for problem in &check.problems {
                outln!("  {problem}");
            }
            outln!(
                "{} problem(s) — `noeta store salvage NEW.db` copies every readable task into a \
                 new file and leaves this one as it is",
                check.problems.len()
            );
        }
    }
    Ok(if check.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `noeta store salvage NEW [--store URL]`: exit 0 when everything was copied, 1 when something
/// could not be (the new file holds the rest).
pub(crate) fn salvage(paths: &HostPaths, store: Option<&str>, new: &Path) -> Result<ExitCode> {
    let file = noeta::store_file(paths, store)?;
    if !file.exists() {
        anyhow::bail!("there is no store file `{}` to salvage", file.display());
    }
    let new = paths.workspace.join(new);
    let salvage = noeta::backends::salvage(&file, &new)?;
    let events: u64 = salvage.tasks.iter().map(|t| t.copied).sum();
    outln!(
        "salvaged {} into {}: {} task(s), {events} event(s), {} content bod{}, {} snapshot(s)",
        file.display(),
        new.display(),
        salvage.tasks.len(),
        salvage.bodies,
        if salvage.bodies == 1 { "y" } else { "ies" },
        salvage.snapshots
    );
    for task in &salvage.tasks {
        if let Some(lost) = &task.lost {
            outln!(
                "  task `{}`: its first {} event(s) copied; the rest is lost: {lost}",
                task.id,
                task.copied
            );
        }
    }
    for lost in salvage.lost_tasks.iter().chain(&salvage.lost_bodies) {
        outln!("  lost: {lost}");
    }
    if salvage.complete() {
        outln!("nothing was lost; {} is unchanged", file.display());
        Ok(ExitCode::SUCCESS)
    } else {
        outln!(
            "{} is unchanged; the copy holds everything that could be read",
            file.display()
        );
        Ok(ExitCode::FAILURE)
    }
}

/// What `.noeta/.gitignore` keeps out of git: the store and what runs leave (transcripts for
/// hooks), never the project's settings, agents, commands, skills or plugins.
const GITIGNORE: &str = "\
# Written by noeta the first time it made its store here: the store and the transcripts\n\
# are this machine's, not the project's. Settings, agents, commands, skills and plugins\n\
# in .noeta/ are not ignored. Edit or delete this file freely; noeta does not write it again.\n\
noeta.db\n\
noeta.db-*\n\
transcripts/\n";

/// After a run made the default store `file` (`<workspace>/.noeta/noeta.db`) and kept it:
/// writes `.noeta/.gitignore` keeping the store out of git, unless the directory has one, and
/// says so once.
pub(crate) fn keep_out_of_git(paths: &HostPaths, file: &std::path::Path) {
    let default = paths.workspace.join(".noeta").join("noeta.db");
    if file != default || !file.exists() {
        return;
    }
    let ignore = paths.workspace.join(".noeta").join(".gitignore");
    if ignore.exists() {
        return;
    }
    if std::fs::write(&ignore, GITIGNORE).is_ok() {
        eoutln!(
            "note: wrote .noeta/.gitignore so that the task store ({}) stays out of git",
            file.display()
        );
    }
}
