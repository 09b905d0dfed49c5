//! Read-only shell commands: the `` !`…` `` lines and ```` ```! ```` blocks of a markdown command
//! that run without an `allowed-tools` grant, as Claude Code runs `git status` or `git diff`
//! without asking.
//!
//! A command is read-only when it is one simple command — no `;`, `&`, `|`, redirection,
//! substitution, variable assignment or line break — whose program and arguments are in the
//! list below: it shows the state of the workspace and changes nothing. Anything else needs a
//! rule in the file's `allowed-tools`.

/// Programs that only read, with the arguments that would make them write or run something
/// else refused (`--output`, `-f`, a path to run).
const PROGRAMS: &[&str] = &[
    "ls", "pwd", "cat", "head", "tail", "wc", "file", "stat", "du", "df", "date", "whoami",
    "which", "uname", "tree", "echo",
];

/// `git` subcommands that only read (their arguments checked by [`git_reads`]).
const GIT_SUBCOMMANDS: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "branch",
    "rev-parse",
    "ls-files",
    "remote",
    "describe",
    "blame",
];

/// Characters that make a command more than one simple, read-only command.
const SHELL_OPERATORS: &[char] = &[
    ';', '&', '|', '<', '>', '$', '`', '(', ')', '{', '}', '\n', '\r', '\\',
];

/// Whether `command` only reads (see the module's documentation).
pub(crate) fn is_read_only(command: &str) -> bool {
    if command.contains(SHELL_OPERATORS) {
        return false;
    }
    let Some(words) = shlex::split(command) else {
        return false;
    };
    let Some((program, args)) = words.split_first() else {
        return false;
    };
    if program == "git" {
        return git_reads(args);
    }
    if !PROGRAMS.contains(&program.as_str()) {
        return false;
    }
    match program.as_str() {
        // Following a file never ends.
        "tail" => !args
            .iter()
            .any(|a| a == "--follow" || a.starts_with("-f") || a.starts_with("-F")),
        // `tree -o FILE` writes one.
        "tree" => !args.iter().any(|a| a.starts_with("-o")),
        // `date -s` sets the clock.
        "date" => !args
            .iter()
            .any(|a| a.starts_with("-s") || a.starts_with("--set")),
        _ => true,
    }
}

/// Whether `git ARGS` only reads: a listed subcommand first (no global option such as `-c`,
/// which can run anything), no option that writes a file or runs an external program, and
/// for `branch`, `remote` and `describe` only the forms that list.
fn git_reads(args: &[String]) -> bool {
    let Some((sub, rest)) = args.split_first() else {
        return false;
    };
    if !GIT_SUBCOMMANDS.contains(&sub.as_str()) {
        return false;
    }
    let writes = |a: &String| {
        a.starts_with("--output")
            || a.starts_with("--ext-diff")
            || a.starts_with("--textconv")
            || a.starts_with("--exec")
            || a.starts_with("--upload-pack")
    };
    if rest.iter().any(writes) {
        return false;
    }
    match sub.as_str() {
        // A name creates, deletes or renames a branch.
        "branch" => rest.iter().all(|a| {
            [
                "--show-current",
                "-a",
                "--all",
                "-r",
                "--remotes",
                "-v",
                "-vv",
                "--verbose",
                "--list",
                "--no-color",
                "--color",
            ]
            .contains(&a.as_str())
        }),
        // `remote add`, `remote remove`, …
        "remote" => rest.iter().all(|a| a == "-v" || a == "--verbose"),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::is_read_only;

    #[test]
    fn the_commands_anthropics_commit_commands_run_are_read_only() {
        for command in [
            "git status",
            "git diff HEAD",
            "git branch --show-current",
            "git log --oneline -10",
            "git diff --cached",
            "ls -la",
            "pwd",
            "git remote -v",
            "cat README.md",
        ] {
            assert!(is_read_only(command), "{command}");
        }
    }

    #[test]
    fn anything_that_can_write_or_run_something_else_is_not() {
        for command in [
            "git status; rm -rf ~",
            "git status && curl example.com",
            "git log | sh",
            "git diff > out.patch",
            "git diff --output=out.patch",
            "git diff --ext-diff",
            "git -c core.pager=sh status",
            "git branch new-branch",
            "git remote add origin x",
            "git commit -m x",
            "git push",
            "git",
            "LD_PRELOAD=./x.so ls",
            "ls $(rm -rf ~)",
            "echo `id`",
            "tail -f log",
            "rm -rf /",
            "date -s 2020-01-01",
            "ls\nrm x",
            "\"unclosed",
            "",
        ] {
            assert!(!is_read_only(command), "{command}");
        }
    }
}
