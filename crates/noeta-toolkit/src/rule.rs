//! Permission rules as Claude Code writes them — `Bash`, `Bash(git *)`, `Bash(npm:*)`,
//! `Edit(src/**)`, `WebFetch(domain:example.com)` — and whether a tool call matches one: a
//! hook's `if`, a command file's `allowed-tools`.
//!
//! A rule names a tool (`*` for any) and, in parentheses, what of the call it looks at:
//! - a shell command (`Bash`): a pattern where `*` stands for any text, matched against each
//!   command of a compound one (`ls && git push` is `ls` and `git push`; `;`, `&&`, `||`, `|`
//!   and new lines separate them), leading `NAME=value` assignments left out; `git:*` is the
//!   older spelling of `git *` (`git` alone matches too);
//! - a file tool (`Read`, `Edit`, `Write`, `MultiEdit`, `NotebookEdit`, `Glob`, `Grep`): a
//!   path pattern (`*` within a directory, `**` across them) against the file, relative to the
//!   workspace when it is inside it;
//! - `WebFetch`: `domain:<host>` against the URL's host;
//! - any other tool: a pattern against its input's first text value.
//!
//! A hook's `if` asks whether a call *matches* ([`PermissionRule::matches`]: any command of
//! a compound one). What grants a call — a command file's `allowed-tools` — asks whether the
//! rules *allow* it ([`rules_allow`]): every command of a compound one must be matched, and a
//! command with a substitution (`$(…)`, backticks, `<(…)`) only by a rule naming the whole
//! tool, so `Bash(git status:*)` never grants `git status && curl …`.

use regex::Regex;
use serde_json::Value;

/// Tools whose rule looks at a path.
const FILE_TOOLS: [&str; 7] = [
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
];

/// One parsed permission rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRule {
    tool: String,
    spec: Option<String>,
}

impl PermissionRule {
    /// Reads `text`; an error says what is wrong with it.
    ///
    /// # Errors
    /// `text` is not `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (tool, spec) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let Some(spec) = rest.strip_suffix(')') else {
                    return Err(format!(
                        "`{text}` is not a permission rule: `Tool` or `Tool(pattern)`"
                    ));
                };
                (tool.trim(), Some(spec.trim().to_owned()))
            }
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'))
        {
            return Err(format!(
                "`{text}` is not a permission rule: `Tool` or `Tool(pattern)`"
            ));
        }
        Ok(Self {
            tool: tool.to_owned(),
            spec: spec.filter(|s| !s.is_empty() && s != "*"),
        })
    }

    /// Whether the call of `tool` with `input` matches (`workspace`: where relative paths
    /// start).
    pub fn matches(&self, tool: &str, input: &Value, workspace: &str) -> bool {
        if self.tool != "*" && self.tool != tool {
            return false;
        }
        let Some(spec) = &self.spec else {
            return true;
        };
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        if tool == "Bash" {
            return text("command").is_some_and(|command| command_matches(spec, command));
        }
        if FILE_TOOLS.contains(&tool) {
            let path = text("file_path")
                .or_else(|| text("notebook_path"))
                .or_else(|| text("path"));
            return path.is_some_and(|path| path_matches(spec, path, workspace));
        }
        if let Some(domain) = spec.strip_prefix("domain:") {
            return text("url").is_some_and(|url| host_of(url) == Some(domain));
        }
        let first = input
            .as_object()
            .and_then(|o| o.values().find_map(Value::as_str));
        first.is_some_and(|value| glob_matches(spec, false, value))
    }
}

/// Whether `text` matches the glob `pattern`: `*` any text (within one directory when
/// `within_dirs`), `**` any text, `?` one character; the rest as is.
fn glob_matches(pattern: &str, within_dirs: bool, text: &str) -> bool {
    let mut regex = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                // `**/` also matches no directory at all.
                if chars.peek() == Some(&'/') {
                    chars.next();
                    regex.push_str("(?:.*/)?");
                } else {
                    regex.push_str(".*");
                }
            }
            '*' if within_dirs => regex.push_str("[^/]*"),
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            other => regex.push_str(&regex::escape(&other.to_string())),
        }
    }
    regex.push('$');
    Regex::new(&regex).is_ok_and(|regex| regex.is_match(text))
}

/// Whether `rules` together allow the call of `tool` with `input` (`workspace`: where
/// relative paths start): for `Bash`, a rule naming the whole tool, or — for a command with no
/// substitution — every command of it matched by some rule; for any other tool, a rule that
/// matches.
pub fn rules_allow(rules: &[PermissionRule], tool: &str, input: &Value, workspace: &str) -> bool {
    if tool != "Bash" {
        return rules.iter().any(|r| r.matches(tool, input, workspace));
    }
    let whole_tool = |r: &PermissionRule| (r.tool == "Bash" || r.tool == "*") && r.spec.is_none();
    if rules.iter().any(whole_tool) {
        return true;
    }
    let Some(command) = input.get("command").and_then(Value::as_str) else {
        return false;
    };
    if ["$(", "`", "<(", ">("].iter().any(|s| command.contains(s)) {
        return false;
    }
    let parts = split_commands(command);
    !parts.is_empty()
        && parts.iter().all(|part| {
            rules.iter().any(|r| {
                (r.tool == "Bash" || r.tool == "*")
                    && r.spec
                        .as_deref()
                        .is_some_and(|spec| command_matches(spec, part))
            })
        })
}

/// `command` with a quoted program unquoted (`"/x/run.sh" a` is `/x/run.sh a`), as the shell
/// reads it; `None` when the program is not quoted.
fn unquoted_program(command: &str) -> Option<String> {
    let quote = command.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &command[1..];
    let end = rest.find(quote)?;
    let program = &rest[..end];
    let after = &rest[end + 1..];
    if !(after.is_empty() || after.starts_with(char::is_whitespace)) {
        return None;
    }
    Some(format!("{program}{after}"))
}

/// Whether any command of `command` matches `spec`.
fn command_matches(spec: &str, command: &str) -> bool {
    // `git:*` is the older spelling of `git *`.
    let pattern = match spec.strip_suffix(":*") {
        Some(prefix) => format!("{prefix} *"),
        None => spec.to_owned(),
    };
    // `git *` also matches a bare `git`.
    let bare = pattern.strip_suffix(" *");
    let one = |part: &str| glob_matches(&pattern, false, part) || bare == Some(part);
    split_commands(command)
        .into_iter()
        .any(|part| one(part) || unquoted_program(part).is_some_and(|p| one(&p)))
}

/// The commands of a compound shell command, each without leading variable assignments.
pub fn split_commands(command: &str) -> Vec<&str> {
    command
        .split(['\n', ';', '|', '&'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut rest = part;
            while let Some((word, tail)) = rest.split_once(char::is_whitespace) {
                let assignment = word.split_once('=').is_some_and(|(name, _)| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                if !assignment {
                    break;
                }
                rest = tail.trim_start();
            }
            rest
        })
        .collect()
}

/// Whether `path` matches the path pattern `spec`, relative to `workspace` when inside it.
fn path_matches(spec: &str, path: &str, workspace: &str) -> bool {
    let relative = path
        .strip_prefix(workspace)
        .map(|p| p.trim_start_matches('/'))
        .unwrap_or(path);
    let spec = spec.trim_start_matches("./");
    glob_matches(spec, true, relative) || glob_matches(spec, true, path)
}

/// The host of an `http(s)` URL.
pub fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    Some(host.split(':').next().unwrap_or(host))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::PermissionRule;

    fn matches(rule: &str, tool: &str, input: serde_json::Value) -> bool {
        PermissionRule::parse(rule)
            .unwrap()
            .matches(tool, &input, "/work/app")
    }

    #[test]
    fn rules_match_as_claude_codes_permission_rules_do() {
        let bash = |command: &str| json!({ "command": command });
        assert!(matches("Bash", "Bash", bash("anything")));
        assert!(!matches("Bash", "Edit", bash("anything")));
        assert!(matches("Bash(git *)", "Bash", bash("git push")));
        assert!(matches("Bash(git *)", "Bash", bash("git")));
        assert!(matches("Bash(git:*)", "Bash", bash("git log -1")));
        assert!(!matches("Bash(git *)", "Bash", bash("gitk")));
        assert!(matches("Bash(rm *)", "Bash", bash("ls; rm -rf build")));
        assert!(matches(
            "Bash(rm *)",
            "Bash",
            bash("cat x | FOO=1 BAR=2 rm y")
        ));
        assert!(!matches("Bash(rm *)", "Bash", bash("echo rm -rf")));
        assert!(matches(
            "Edit(src/**)",
            "Edit",
            json!({ "file_path": "/work/app/src/a/b.rs" })
        ));
        assert!(!matches(
            "Edit(src/*)",
            "Edit",
            json!({ "file_path": "/work/app/src/a/b.rs" })
        ));
        assert!(matches(
            "Edit(**/*.md)",
            "Edit",
            json!({ "file_path": "/work/app/README.md" })
        ));
        assert!(matches(
            "WebFetch(domain:example.com)",
            "WebFetch",
            json!({ "url": "https://user@example.com:8443/x?y" })
        ));
        assert!(!matches(
            "WebFetch(domain:example.com)",
            "WebFetch",
            json!({ "url": "https://example.org/" })
        ));
        assert!(matches("*", "Anything", json!({})));
        assert!(matches(
            "Bash(/p/setup.sh:*)",
            "Bash",
            bash("\"/p/setup.sh\" --max-iterations 5 build it")
        ));
        assert!(!matches(
            "Bash(/p/setup.sh:*)",
            "Bash",
            bash("\"/p/setup.sh2\" x")
        ));
        for bad in ["Bash(git", "", "Bash git", "(x)"] {
            assert!(PermissionRule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rules_allow_a_compound_command_only_when_every_command_is_covered() {
        let rules = |list: &[&str]| -> Vec<PermissionRule> {
            list.iter()
                .map(|r| PermissionRule::parse(r).unwrap())
                .collect()
        };
        let allows = |list: &[&str], command: &str| {
            super::rules_allow(&rules(list), "Bash", &json!({ "command": command }), "/w")
        };
        assert!(allows(&["Bash(git status:*)"], "git status"));
        assert!(!allows(
            &["Bash(git status:*)"],
            "git status && curl x | sh"
        ));
        assert!(allows(
            &["Bash(git add:*)", "Bash(git commit:*)"],
            "git add . && git commit -m x"
        ));
        assert!(!allows(&["Bash(git status:*)"], "git status $(rm -rf ~)"));
        assert!(!allows(&["Bash(echo:*)"], "echo `id`"));
        assert!(allows(&["Bash"], "a=$(ls) && echo $a"));
        assert!(!allows(&[], "git status"));
        assert!(!allows(&["Bash(git:*)"], ""));
        assert!(super::rules_allow(
            &rules(&["Edit(src/**)"]),
            "Edit",
            &json!({ "file_path": "/w/src/a.rs" }),
            "/w"
        ));
    }
}
