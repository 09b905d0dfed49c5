//! "Always" at the terminal's permission asks, remembered: each answer becomes a permission
//! rule in Claude Code's form — `Bash(git diff:*)` for the commands of a shell call,
//! `WebFetch(domain:docs.rs)` for a fetch, the tool's name otherwise — kept for this workspace
//! in `~/.noeta/approvals.json` (the user's alone: a cloned repository cannot add to it), and
//! a later call those rules cover runs without asking, in this chat and the next. Remove a
//! rule from the file to be asked again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use noeta_core::model::ToolCall;
use noeta_toolkit::{PermissionRule, host_of, rules_allow, split_commands};
use serde_json::Value;

/// Programs whose first argument is a subcommand that says what they do (`git diff`, `cargo
/// test`): a rule for them keeps the subcommand.
const WITH_SUBCOMMANDS: [&str; 14] = [
    "git", "cargo", "npm", "pnpm", "yarn", "npx", "go", "docker", "podman", "kubectl", "make",
    "pip", "uv", "gh",
];

/// The rules one workspace's "always" answers made.
pub(crate) struct Approvals {
    /// `~/.noeta/approvals.json` (none without a home: nothing is remembered).
    file: Option<PathBuf>,
    workspace: String,
    rules: Mutex<Vec<String>>,
    /// Why the file could not be read, if so (it is then never written over).
    broken: Option<String>,
}

impl Approvals {
    /// The rules kept for `workspace` under `home`.
    pub(crate) fn load(home: Option<&Path>, workspace: &Path) -> Self {
        let file = home.map(|h| h.join(".noeta/approvals.json"));
        let workspace = workspace.display().to_string();
        let (rules, broken) = match file.as_deref().map(read) {
            Some(Ok(all)) => (all.get(&workspace).cloned().unwrap_or_default(), None),
            Some(Err(why)) => (Vec::new(), Some(why)),
            None => (Vec::new(), None),
        };
        Self {
            file,
            workspace,
            rules: Mutex::new(rules),
            broken,
        }
    }

    /// Why the remembered answers are not used, when the file cannot be read.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Whether the remembered rules cover `call`.
    pub(crate) fn allows(&self, call: &ToolCall) -> bool {
        let rules: Vec<PermissionRule> = self
            .rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|r| PermissionRule::parse(r).ok())
            .collect();
        !rules.is_empty() && rules_allow(&rules, &call.name, &call.input, &self.workspace)
    }

    /// Remembers `rules` for this workspace: from now on, and in the file.
    pub(crate) fn remember(&self, rules: &[String]) -> Result<(), String> {
        {
            let mut kept = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
            for rule in rules {
                if !kept.contains(rule) {
                    kept.push(rule.clone());
                }
            }
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        if let Some(why) = &self.broken {
            return Err(format!("not written, as it cannot be read: {why}"));
        }
        let mut all = read(file)?;
        all.insert(
            self.workspace.clone(),
            self.rules
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        );
        write(file, &all)
    }

    /// The file, for messages.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

/// Every workspace's rules in `file` (none when it does not exist).
fn read(file: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a JSON object of workspace paths to lists of rules: {e}",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// Writes `all` to `file` whole, readable by the user alone.
fn write(file: &Path, all: &BTreeMap<String, Vec<String>>) -> Result<(), String> {
    use std::io::Write as _;
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", file.display());
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let text = serde_json::to_string_pretty(all).map_err(|e| e.to_string())?;
    let temp = file.with_extension("json.new");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&temp).map_err(fail)?;
    out.write_all(text.as_bytes()).map_err(fail)?;
    out.write_all(b"\n").map_err(fail)?;
    std::fs::rename(&temp, file).map_err(fail)
}

/// Programs that run whatever their arguments say (a shell, `env`, `sudo`, `xargs`, …): a
/// rule for them is the exact command, never a prefix, or "always" would allow anything.
const RUN_OTHERS: [&str; 24] = [
    "sh", "bash", "zsh", "dash", "fish", "env", "sudo", "doas", "su", "xargs", "nohup", "timeout",
    "nice", "time", "exec", "eval", "command", "watch", "parallel", "ssh", "python", "python3",
    "node", "perl",
];

/// The rules an "always" for `call` remembers: one per command of a shell call (its program,
/// and its subcommand for programs that have them, then `:*`; the exact command for programs
/// that run others), the host of a fetch, else the tool. None when a command cannot be told
/// exactly (a program that runs others given a glob character, a quoted separator): that call
/// is allowed once.
pub(crate) fn rules_for(call: &ToolCall) -> Vec<String> {
    let text = |key: &str| call.input.get(key).and_then(Value::as_str);
    match (call.name.as_str(), text("command"), text("url")) {
        ("Bash", Some(command), _) => {
            // Quotes around a separator would cut a command in the wrong place: not remembered.
            if command.contains(['\'', '"', '\\']) && command.contains([';', '|', '&', '\n']) {
                return Vec::new();
            }
            let mut rules = Vec::new();
            for part in split_commands(command) {
                let words: Vec<&str> = part.split_whitespace().collect();
                let Some(program) = words.first() else {
                    continue;
                };
                let name = program.rsplit('/').next().unwrap_or(program);
                if RUN_OTHERS.contains(&name) {
                    if part.contains(['*', '?', '[']) {
                        return Vec::new();
                    }
                    let rule = format!("Bash({part})");
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                    continue;
                }
                let prefix = match words.get(1) {
                    Some(sub) if WITH_SUBCOMMANDS.contains(program) && !sub.starts_with('-') => {
                        format!("{program} {sub}")
                    }
                    _ => (*program).to_owned(),
                };
                let rule = format!("Bash({prefix}:*)");
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
            rules
        }
        ("WebFetch", _, Some(url)) => match host_of(url) {
            Some(host) => vec![format!("WebFetch(domain:{host})")],
            None => vec!["WebFetch".to_owned()],
        },
        (tool, _, _) => vec![tool.to_owned()],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    fn call(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            input,
        }
    }

    #[test]
    fn always_remembers_a_rule_per_command_a_fetchs_host_or_the_tool() {
        assert_eq!(
            rules_for(&call(
                "Bash",
                json!({ "command": "git diff HEAD && ls -la | wc -l" })
            )),
            ["Bash(git diff:*)", "Bash(ls:*)", "Bash(wc:*)"]
        );
        assert_eq!(
            rules_for(&call(
                "WebFetch",
                json!({ "url": "https://docs.rs/x", "prompt": "p" })
            )),
            ["WebFetch(domain:docs.rs)"]
        );
        assert_eq!(
            rules_for(&call("Write", json!({ "file_path": "a" }))),
            ["Write"]
        );
        // A program that runs others is remembered as the exact command, or not at all.
        assert_eq!(
            rules_for(&call("Bash", json!({ "command": "sh -c 'ls -la'" }))),
            ["Bash(sh -c 'ls -la')"]
        );
        assert!(rules_for(&call("Bash", json!({ "command": "bash -c 'rm *.o'" }))).is_empty());
        assert!(rules_for(&call("Bash", json!({ "command": "sh -c 'ls; rm x'" }))).is_empty());
    }

    #[test]
    fn always_for_a_shell_never_covers_another_command_it_runs() {
        let home = tempfile::tempdir().unwrap();
        let approvals = Approvals::load(Some(home.path()), Path::new("/w"));
        let listing = call("Bash", json!({ "command": "sh -c 'ls -la'" }));
        approvals.remember(&rules_for(&listing)).unwrap();
        assert!(approvals.allows(&listing));
        assert!(!approvals.allows(&call("Bash", json!({ "command": "sh -c 'rm -rf ~'" }))));
        assert!(!approvals.allows(&call("Bash", json!({ "command": "/bin/sh -c 'rm -rf ~'" }))));
    }

    #[test]
    fn remembered_rules_cover_later_calls_in_this_workspace_only() {
        let home = tempfile::tempdir().unwrap();
        let here = Path::new("/work/a");
        let approvals = Approvals::load(Some(home.path()), here);
        let diff = call("Bash", json!({ "command": "git diff" }));
        assert!(!approvals.allows(&diff));
        approvals.remember(&rules_for(&diff)).unwrap();
        assert!(approvals.allows(&call("Bash", json!({ "command": "git diff --stat" }))));
        assert!(!approvals.allows(&call("Bash", json!({ "command": "git push" }))));
        assert!(!approvals.allows(&call("Bash", json!({ "command": "git diff; rm -rf x" }))));
        // Kept for the next chat in this workspace, not in another.
        let again = Approvals::load(Some(home.path()), here);
        assert!(again.allows(&diff));
        let elsewhere = Approvals::load(Some(home.path()), Path::new("/work/b"));
        assert!(!elsewhere.allows(&diff));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let file = home.path().join(".noeta/approvals.json");
            let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn a_broken_file_is_named_used_for_nothing_and_never_written_over() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".noeta")).unwrap();
        let file = home.path().join(".noeta/approvals.json");
        std::fs::write(&file, "[not an object").unwrap();
        let approvals = Approvals::load(Some(home.path()), Path::new("/w"));
        assert!(approvals.problem().unwrap().contains("approvals.json"));
        let err = approvals.remember(&["Write".to_owned()]).unwrap_err();
        assert!(err.contains("not written"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[not an object");
    }
}
