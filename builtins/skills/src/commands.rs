//! Markdown commands, as Claude Code writes them: `commands/*.md` under `~/.noeta/commands`,
//! the workspace's `.claude/commands` and `.noeta/commands` (a later directory's command wins
//! over an earlier one's of the same name; subdirectories only organise). `/name args` expands
//! the file's body and sends it as the person's message:
//!
//! - `$ARGUMENTS` is the text after the name, `$1` … `$9` its words (split as a shell would);
//!   a body with neither gets the arguments appended on an `ARGUMENTS:` line;
//! - `@path` (at the start of a word) is replaced by that workspace file's text, fenced; a
//!   path that leaves the workspace is refused, one that names no file stays as written;
//! - `` !`command` `` (at the start of a line or after a space) and a ```` ```! ```` fenced
//!   block run before the message is sent, and what they print takes their place — only when
//!   the command is read-only (`git status`, `git diff`, `ls`, …: [`crate::read_only`]) or the
//!   file's `allowed-tools` grants every command of it, and the permission gate does not deny
//!   it (`pre_execute`).
//!
//! Frontmatter (all optional): `description`, `argument-hint`, `allowed-tools`, `model`,
//! `disable-model-invocation`; other keys are ignored.

use std::path::{Path, PathBuf};

use noeta_core::extension::{CommandReply, CommandSpec, Extension, HookError, HookResult, View};
use noeta_core::hooks::CallVerdict;
use yaml_serde::Value;

use crate::settings::PluginCommands;

/// The extension's name.
pub(crate) const EXTENSION: &str = "markdown_commands";

/// A command file at most this long is read.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// An `@path` file at most this long is included.
const MAX_INCLUDE_BYTES: u64 = 256 * 1024;
/// Subdirectories deeper than this are not searched.
const MAX_DEPTH: usize = 4;

/// One command file.
#[derive(Debug, Clone, PartialEq)]
struct CommandFile {
    /// `/name`: the file's stem.
    name: String,
    /// The file.
    path: PathBuf,
    /// Where it comes from (`user`, `project`, `plugin <name>`).
    source: String,
    /// A Claude Code plugin's `${CLAUDE_PLUGIN_ROOT}` and `${CLAUDE_PLUGIN_DATA}`, and its
    /// options that are not sensitive (`${user_config.KEY}`).
    plugin_paths: Option<(PathBuf, PathBuf, std::collections::BTreeMap<String, String>)>,
    /// `description`, else the body's first line.
    description: String,
    /// `argument-hint`.
    argument_hint: Option<String>,
    /// `allowed-tools`: the permission rules its `` !`…` `` commands may run under.
    allowed_tools: Vec<String>,
    /// The body.
    body: String,
}

/// Where commands are read from, lowest first.
fn command_dirs(home: Option<&Path>, workspace: Option<&Path>) -> Vec<(&'static str, PathBuf)> {
    let mut dirs = Vec::new();
    if let Some(home) = home {
        dirs.push(("user", home.join(".noeta").join("commands")));
    }
    if let Some(workspace) = workspace {
        dirs.push(("project", workspace.join(".claude").join("commands")));
        dirs.push(("project", workspace.join(".noeta").join("commands")));
    }
    dirs
}

/// The `*.md` files under `dir`, sorted, searched `MAX_DEPTH` levels down.
fn markdown_files(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() && depth < MAX_DEPTH {
            markdown_files(&path, depth + 1, found);
        } else if path.is_file() && path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

/// Parses a command file; the error says why it is skipped.
fn parse(text: &str, path: &Path, source: &str) -> Result<CommandFile, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = match text.strip_prefix("---") {
        Some(rest) if rest.starts_with(['\n', '\r']) => {
            let end = rest
                .find("\n---")
                .ok_or("the frontmatter opened by `---` has no closing `---` line")?;
            let body = &rest[end + 4..];
            let body = body.split_once('\n').map_or("", |(_, b)| b);
            (Some(&rest[..end]), body)
        }
        _ => (None, text),
    };
    let mut description = None;
    let mut argument_hint = None;
    let mut allowed_tools = Vec::new();
    if let Some(front) = front {
        let value: Value = yaml_serde::from_str(front)
            .map_err(|e| format!("the frontmatter is not valid YAML: {e}"))?;
        // Claude Code keeps these fields as written: `argument-hint: [project-name]`, which
        // YAML reads as a list, is the text `[project-name]`.
        let text_of = |key: &str| match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(crate::frontmatter::scalar)
                .collect::<Option<Vec<_>>>()
                .map(|items| Some(format!("[{}]", items.join(", "))))
                .ok_or_else(|| format!("`{key}` must be text or a list of text")),
            Some(other) => crate::frontmatter::scalar(other)
                .map(|text| Some(text.trim().to_owned()))
                .ok_or_else(|| format!("`{key}` must be text or a list of text")),
        };
        description = text_of("description")?;
        argument_hint = text_of("argument-hint")?;
        allowed_tools = match value.get("allowed-tools") {
            None | Some(Value::Null) => Vec::new(),
            // `Bash(git add:*), Bash(git status:*)`: commas inside parentheses stay.
            Some(Value::String(list)) => split_rules(list),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(|item| item.as_str().map(|s| s.trim().to_owned()))
                .collect::<Option<Vec<_>>>()
                .ok_or("`allowed-tools` must be text or a list of text")?,
            Some(_) => return Err("`allowed-tools` must be text or a list of text".to_owned()),
        };
    }
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("`{name}` cannot be a command name (no spaces)"));
    }
    let body = body.trim_start_matches(['\n', '\r']).trim_end().to_owned();
    let description = description.filter(|d| !d.is_empty()).unwrap_or_else(|| {
        body.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().trim_start_matches('#').trim().to_owned())
            .unwrap_or_default()
    });
    Ok(CommandFile {
        name,
        path: path.to_owned(),
        source: source.to_owned(),
        plugin_paths: None,
        description,
        argument_hint,
        allowed_tools,
        body,
    })
}

/// A comma-separated list of permission rules, commas inside parentheses kept.
fn split_rules(list: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut depth = 0_usize;
    let mut current = String::new();
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                rules.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    rules.push(current);
    rules
        .into_iter()
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .collect()
}

/// What [`load`] found: the commands, the reasons files were skipped, and the names of
/// commands whose files cannot be used, each with why.
type Loaded = (Vec<CommandFile>, Vec<String>, Vec<(String, String)>);

/// Every command — Claude Code plugins' as `<plugin>:<name>`, then the directories', the later
/// directory winning a name (a later directory's file, working or not, replaces an earlier
/// one's) — the files skipped, with why, and the commands that cannot be used, by name, with
/// why (naming the file and the field).
fn load(home: Option<&Path>, workspace: Option<&Path>, plugins: &[PluginCommands]) -> Loaded {
    let mut commands: Vec<CommandFile> = Vec::new();
    let mut skipped = Vec::new();
    let mut broken: Vec<(String, String)> = Vec::new();
    let mut dirs: Vec<(String, PathBuf, Option<&PluginCommands>)> = plugins
        .iter()
        .map(|p| (format!("plugin {}", p.plugin), p.dir.clone(), Some(p)))
        .collect();
    dirs.extend(
        command_dirs(home, workspace)
            .into_iter()
            .map(|(source, dir)| (source.to_owned(), dir, None)),
    );
    for (source, dir, plugin) in dirs {
        let mut files = Vec::new();
        markdown_files(&dir, 0, &mut files);
        for path in files {
            let text = match noeta_core::manifest::read_capped(&path, MAX_FILE_BYTES) {
                Ok(Ok(text)) => text,
                Ok(Err(size)) => {
                    skipped.push(format!(
                        "{}: {size} bytes, over the {MAX_FILE_BYTES}-byte limit of a command",
                        path.display()
                    ));
                    continue;
                }
                Err(err) => {
                    skipped.push(format!("{}: {err}", path.display()));
                    continue;
                }
            };
            match parse(&text, &path, &source) {
                Ok(mut command) => {
                    if let Some(plugin) = plugin {
                        command.name = format!("{}:{}", plugin.plugin, command.name);
                        command.plugin_paths = Some((
                            plugin.root.clone(),
                            plugin.data.clone(),
                            plugin.options.clone(),
                        ));
                    }
                    commands.retain(|c| c.name != command.name);
                    broken.retain(|(n, _)| *n != command.name);
                    commands.push(command);
                }
                Err(err) => {
                    let reason = format!("{}: {err}", path.display());
                    // Named as it would have been, so `/name` says why instead of being sent
                    // to the model as text.
                    if let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) {
                        let name = match plugin {
                            Some(plugin) => format!("{}:{stem}", plugin.plugin),
                            None => stem,
                        };
                        commands.retain(|c| c.name != name);
                        broken.retain(|(n, _)| *n != name);
                        broken.push((name, reason.clone()));
                    }
                    skipped.push(reason);
                }
            }
        }
    }
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    broken.sort();
    (commands, skipped, broken)
}

/// The body with the plugin's paths and options and the arguments in place.
fn with_arguments(command: &CommandFile, args: &str) -> String {
    let words = shlex::split(args).unwrap_or_else(|| {
        args.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let mut text = command.body.clone();
    if let Some((root, data, options)) = &command.plugin_paths {
        text = text.replace("${CLAUDE_PLUGIN_ROOT}", &root.display().to_string());
        if text.contains("${CLAUDE_PLUGIN_DATA}") {
            let _ = std::fs::create_dir_all(data);
            text = text.replace("${CLAUDE_PLUGIN_DATA}", &data.display().to_string());
        }
        for (key, value) in options {
            text = text.replace(&format!("${{user_config.{key}}}"), value);
        }
    }
    let mentions_args =
        text.contains("$ARGUMENTS") || (1..=9).any(|i| text.contains(&format!("${i}")));
    text = text.replace("$ARGUMENTS", args.trim());
    for index in (1..=9).rev() {
        let word = words.get(index - 1).map_or("", String::as_str);
        text = text.replace(&format!("${index}"), word);
    }
    if !mentions_args && !args.trim().is_empty() {
        text.push_str("\n\nARGUMENTS: ");
        text.push_str(args.trim());
    }
    text
}

/// How long one `` !`…` `` command may run.
const PRE_EXECUTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A piece of a command's text: text as written, or a shell command to run in its place.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'t> {
    Text(&'t str),
    Run(&'t str),
}

/// The `` !`command` `` spans of `text` (at the start of a line or after whitespace) between
/// its plain text.
fn inline_pieces<'t>(text: &'t str, pieces: &mut Vec<Piece<'t>>) {
    let mut rest = text;
    let mut searched = 0;
    while let Some(found) = rest[searched..].find("!`") {
        let at = searched + found;
        let starts_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after = &rest[at + 2..];
        match after.find('`') {
            Some(end) if starts_word && end > 0 => {
                pieces.push(Piece::Text(&rest[..at]));
                pieces.push(Piece::Run(&after[..end]));
                rest = &after[end + 1..];
                searched = 0;
            }
            _ => searched = at + 2,
        }
    }
    pieces.push(Piece::Text(rest));
}

/// `text` cut into plain text, ```` ```! ```` fenced blocks (a line that is only ```` ```! ````,
/// the script, a line that is only ```` ``` ````) and `` !`command` `` spans — in one pass, so
/// what a command prints is never run in turn.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut plain_from = 0;
    let mut line_start = 0;
    while line_start < text.len() {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        if text[line_start..line_end].trim() == "```!" {
            let script_start = (line_end + 1).min(text.len());
            let mut close = script_start;
            let mut closed = None;
            while close < text.len() {
                let end = text[close..].find('\n').map_or(text.len(), |i| close + i);
                if text[close..end].trim() == "```" {
                    closed = Some((close, end));
                    break;
                }
                close = end + 1;
            }
            if let Some((close, end)) = closed {
                inline_pieces(&text[plain_from..line_start], &mut pieces);
                let script = text[script_start..close].trim_end_matches(['\n', '\r']);
                pieces.push(Piece::Run(script));
                plain_from = end;
                line_start = end + 1;
                continue;
            }
        }
        line_start = line_end + 1;
    }
    inline_pieces(&text[plain_from.min(text.len())..], &mut pieces);
    pieces.retain(|p| *p != Piece::Text(""));
    pieces
}

/// `text` with each `` !`command` `` and ```` ```! ```` block replaced by what it printed. Each
/// runs only when it is read-only ([`crate::read_only`]) or the file's `allowed-tools` allows it
/// (every command of a compound one granted: `Bash(git status:*)`), and the gate — the
/// permission policy, deny lists, PreToolUse hooks — does not deny it (an ask is answered by
/// that grant, as Claude Code's `allowed-tools` does), in the task's execution environment.
async fn pre_execute(
    command: &CommandFile,
    text: &str,
    view: &View<'_>,
    home: Option<&Path>,
) -> Result<String, String> {
    let pieces = pieces(text);
    if !pieces.iter().any(|p| matches!(p, Piece::Run(_))) {
        return Ok(text.to_owned());
    }
    let file = command.path.display();
    let workspace = view
        .workspace()
        .map(|w| w.display().to_string())
        .unwrap_or_default();
    let mut rules = Vec::new();
    for rule in &command.allowed_tools {
        // `Bash(${CLAUDE_PLUGIN_ROOT}/scripts/setup.sh:*)` names the plugin's own script.
        let rule = match &command.plugin_paths {
            Some((root, data, _)) => rule
                .replace("${CLAUDE_PLUGIN_ROOT}", &root.display().to_string())
                .replace("${CLAUDE_PLUGIN_DATA}", &data.display().to_string()),
            None => rule.clone(),
        };
        rules.push(
            noeta_toolkit::PermissionRule::parse(&rule)
                .map_err(|why| format!("{file}: `allowed-tools`: {why}"))?,
        );
    }
    // A project's commands run nothing until the user trusts the workspace as it is now.
    if command.source == "project" {
        let trust =
            noeta_core::TrustStore::workspace_of(home, view.workspace().unwrap_or(Path::new(".")));
        if let Some(why) = trust.why_not() {
            return Err(format!(
                "{file}: its `!`…`` commands are not run, since {why} (a cloned repository \
                 never runs a command by itself) — `noeta trust {workspace}` to run them"
            ));
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    for piece in pieces {
        let shell = match piece {
            Piece::Text(text) => {
                out.push_str(text);
                continue;
            }
            Piece::Run(shell) => shell,
        };
        index += 1;
        let shown = shell.lines().next().unwrap_or_default();
        let call = noeta_core::model::ToolCall {
            id: format!("{}-pre-{index}", command.name),
            name: "Bash".to_owned(),
            input: serde_json::json!({ "command": shell }),
        };
        if !crate::read_only::is_read_only(shell)
            && !noeta_toolkit::rules_allow(&rules, "Bash", &call.input, &workspace)
        {
            return Err(format!(
                "{file}: `{shown}` is not read-only and not granted by its `allowed-tools` (add \
                 a rule such as `Bash({}:*)` to run it before the command is sent)",
                shown.split_whitespace().next().unwrap_or(shown)
            ));
        }
        match view.ask_gate(&call).await {
            CallVerdict::Deny(reason) => {
                return Err(format!("{file}: `{shown}` is denied: {reason}"));
            }
            CallVerdict::Rewrite(_) => {
                return Err(format!(
                    "{file}: `{shown}` would be rewritten by a hook; it is not run"
                ));
            }
            _ => {}
        }
        let env = view
            .exec_env()
            .ok_or_else(|| format!("{file}: `{shown}`: this host runs no commands"))?;
        let run = noeta_core::exec::ExecCommand::new("sh", ["-c", shell])
            .with_timeout(PRE_EXECUTION_TIMEOUT);
        let ran = env
            .run(&run)
            .await
            .map_err(|err| format!("{file}: `{shown}` cannot run: {err}"))?;
        if ran.timed_out {
            return Err(format!(
                "{file}: `{shown}` gave no result within {} s",
                PRE_EXECUTION_TIMEOUT.as_secs()
            ));
        }
        let mut printed = String::from_utf8_lossy(&ran.stdout).trim_end().to_owned();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        if !stderr.trim().is_empty() {
            if !printed.is_empty() {
                printed.push('\n');
            }
            printed.push_str(stderr.trim_end());
        }
        if ran.status != Some(0) {
            printed.push_str(&format!(
                "\n(exit status {})",
                ran.status.map_or("unknown".to_owned(), |s| s.to_string())
            ));
        }
        out.push_str(&printed);
    }
    Ok(out)
}

/// `@path` words replaced by the workspace file's text.
fn include_files(text: &str, workspace: Option<&Path>) -> Result<String, String> {
    let Some(workspace) = workspace else {
        return Ok(text.to_owned());
    };
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let starts_word = at == 0 || rest[..at].ends_with(char::is_whitespace);
        let after = &rest[at + 1..];
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ')' | '`' | '"'))
            .unwrap_or(after.len());
        let reference = after[..end].trim_end_matches(['.', ':']);
        out.push_str(&rest[..at]);
        if !starts_word || reference.is_empty() {
            out.push('@');
            rest = after;
            continue;
        }
        let path = root.join(reference);
        match path.canonicalize() {
            Ok(real) if !real.starts_with(&root) => {
                return Err(format!(
                    "`@{reference}` is outside the workspace ({}); only workspace files are included",
                    root.display()
                ));
            }
            Ok(real) if real.is_file() => {
                let body = match noeta_core::manifest::read_capped(&real, MAX_INCLUDE_BYTES) {
                    Ok(Ok(body)) => body,
                    Ok(Err(size)) => {
                        return Err(format!(
                            "`@{reference}` is {size} bytes, over the {MAX_INCLUDE_BYTES}-byte \
                             limit of an included file"
                        ));
                    }
                    Err(err) => return Err(format!("`@{reference}` cannot be read: {err}")),
                };
                out.push_str(&format!("{reference}:\n```\n{}\n```", body.trim_end()));
            }
            // Not a file (an e-mail address, a mention): kept as written.
            _ => out.push_str(&format!("@{reference}")),
        }
        rest = &after[reference.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The extension: lists the command files and expands one when it is run.
pub(crate) struct MarkdownCommands {
    home: Option<PathBuf>,
    /// Claude Code plugins' commands directories.
    plugins: Vec<PluginCommands>,
}

impl MarkdownCommands {
    pub(crate) fn new(home: Option<PathBuf>, plugins: Vec<PluginCommands>) -> Self {
        Self { home, plugins }
    }
}

#[async_trait::async_trait]
impl Extension for MarkdownCommands {
    fn name(&self) -> &str {
        EXTENSION
    }

    fn commands(&self, view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        let (commands, skipped, broken) =
            load(self.home.as_deref(), view.workspace(), &self.plugins);
        for reason in skipped {
            tracing::warn!("command skipped: {reason}");
        }
        let mut specs: Vec<CommandSpec> = commands
            .into_iter()
            .map(|c| {
                let mut description = format!("{} ({})", c.description, c.source);
                if let Some(hint) = &c.argument_hint {
                    description.push_str(&format!(" — arguments: {hint}"));
                }
                CommandSpec {
                    name: c.name,
                    description,
                }
            })
            .collect();
        // Listed with why, so `/name` is refused saying so rather than sent as text.
        specs.extend(broken.into_iter().map(|(name, reason)| CommandSpec {
            name,
            description: format!("cannot be used: {reason}"),
        }));
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(specs)
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        let (commands, _, broken) = load(self.home.as_deref(), view.workspace(), &self.plugins);
        if let Some((_, reason)) = broken.iter().find(|(n, _)| n == name) {
            return Err(HookError::new(format!(
                "command `/{name}` cannot be used: {reason}"
            )));
        }
        let command = commands
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| HookError::new(format!("unknown command `/{name}`")))?;
        // The commands first, so an included file's text is never run.
        let text = pre_execute(
            &command,
            &with_arguments(&command, args),
            view,
            self.home.as_deref(),
        )
        .await
        .map_err(HookError::new)?;
        let text = include_files(&text, view.workspace()).map_err(HookError::new)?;
        Ok(CommandReply::Send(text))
    }
}

#[cfg(test)]
mod tests {
    use super::{Piece, pieces};

    #[test]
    fn inline_commands_and_fenced_blocks_are_cut_out_in_one_pass() {
        let text = "Status: !`git status`\nDiff:\n!`git diff HEAD`\nNot a command: wow!`x` \
                    and `!`.\n```!\n\"/p/setup.sh\" a b\necho done\n```\nGo on.\n```!\nunclosed";
        assert_eq!(
            pieces(text),
            [
                Piece::Text("Status: "),
                Piece::Run("git status"),
                Piece::Text("\nDiff:\n"),
                Piece::Run("git diff HEAD"),
                Piece::Text("\nNot a command: wow!`x` and `!`.\n"),
                Piece::Run("\"/p/setup.sh\" a b\necho done"),
                Piece::Text("\nGo on.\n```!\nunclosed"),
            ]
        );
        assert_eq!(pieces("plain"), [Piece::Text("plain")]);
        assert_eq!(pieces(""), []);
    }
}
