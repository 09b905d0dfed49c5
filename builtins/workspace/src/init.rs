//! `/init`: the instructions extension's slash command, as Claude Code's `/init` is for
//! `CLAUDE.md` — the agent explores the workspace with its own tools and writes `NOETA.md`, the
//! first instruction file noeta reads, for the agents that work here later. It is a message
//! sent on the person's behalf: the turn runs as any other (the file's `Write` is asked about
//! as any write is), and an existing instruction file is improved, not replaced.

use noeta_core::extension::{CommandReply, CommandSpec, HookError, View};

use crate::instructions::INSTRUCTION_FILES;

/// The command's name.
pub(crate) const COMMAND: &str = "init";

/// The command, as the extension offers it.
pub(crate) fn spec() -> CommandSpec {
    CommandSpec {
        name: COMMAND.to_owned(),
        description: "explore this workspace and write NOETA.md: how to build, test and work \
                      in it, for the agents that work here"
            .to_owned(),
    }
}

/// The message `/init [what to stress]` sends.
pub(crate) fn run(view: &View<'_>, name: &str, args: &str) -> Result<CommandReply, HookError> {
    if name != COMMAND {
        return Err(HookError::new(format!("unknown command `/{name}`")));
    }
    let existing = view.workspace().and_then(|root| {
        INSTRUCTION_FILES
            .iter()
            .find(|file| root.join(file).is_file())
            .copied()
    });
    let mut prompt = String::from(
        "Explore this workspace and write a file named NOETA.md at its root, for the AI \
         agents that will work here after you. Look before you write: the README and other \
         docs, the build files (Cargo.toml, package.json, pyproject.toml, Makefile and the \
         like), the CI configuration, the layout of the source tree, and a few central files. \
         Then write NOETA.md with:\n\
         - the commands to build, test (all tests, and one test alone), lint and format, \
         exactly as this project runs them;\n\
         - the architecture a newcomer needs: the main parts, where they live, and how they \
         fit together — what needs reading several files to see, not what one file says;\n\
         - the project's own conventions and rules that are not obvious from the code.\n\
         Keep it short and specific to this project: no generic advice, no listing of every \
         file, nothing you have not checked.",
    );
    match existing {
        Some("NOETA.md") => prompt.push_str(
            "\nNOETA.md exists: read it first and improve it where it is wrong, stale or \
             missing something, keeping what is still right.",
        ),
        Some(other) => prompt.push_str(&format!(
            "\n{other} exists: read it first; carry over what is still right into NOETA.md."
        )),
        None => {}
    }
    let stress = args.trim();
    if !stress.is_empty() {
        prompt.push_str(&format!(
            "\nThe person asks you to pay attention to: {stress}"
        ));
    }
    Ok(CommandReply::Send(prompt))
}
