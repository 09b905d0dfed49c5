//! Agent files: Markdown with YAML frontmatter under `~/.noeta/agents/`,
//! `<workspace>/.claude/agents/` and `<workspace>/.noeta/agents/`, each defining one agent.
//! Claude Code's agent files load as written: `model` is used when the run's provider knows
//! it, its other keys are kept (and reported once as unused), frontmatter that is not strict YAML is read as Claude Code
//! reads it, and a file without `plugins` gets the default agent's. A file that does not
//! load fails only itself ([`read_agent_files`]).
//!
//! ```text
//! ---
//! name: reviewer
//! description: Reviews a change
//! plugins:
//!   - fs
//!   - web: { max_results: 3 }
//! tools: [Read, Grep, Glob]
//! agents: [explore]
//! ---
//! You review changes. …
//! ```
//!
//! The body is the agent's instructions. Every agent built from a file keeps `react`'s
//! `tool_search` and `structured_output`: `react` is always on and cannot be switched off, and
//! an allow-list in `tools` always lets `ToolSearch` and `structured_output` through.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use noeta_core::AgentOptions;
use serde_json::{Map, Value};

use crate::conventions::HostPaths;
use noeta_builtin_react::{STRUCTURED_OUTPUT, TOOL_SEARCH};

use crate::layers::merge_value;
use crate::settings::{MAX_SETTINGS_BYTES, short};

/// The model-visible tools `react` brings to every agent built from a file; an allow-list in
/// `tools` always includes them.
pub const AGENT_FILE_TOOLS: [&str; 2] = ["ToolSearch", "structured_output"];

const KNOWN_KEYS: &str = "name, description, plugins, tools, agents";
/// Keys whose value may be read as plain text when the frontmatter is not strict YAML (Claude
/// Code accepts an unquoted `: ` and multi-line `<example>` text in a description).
const PLAIN_TEXT_KEYS: [&str; 2] = ["description", "whenToUse"];
/// The keys an agent file's frontmatter may hold (Claude Code's and noeta's): in the lenient
/// reading, a line under a plain-text key that starts with any other `word:` (`Context:`,
/// `user:` of an example) continues the text.
const FRONTMATTER_KEYS: [&str; 20] = [
    "name",
    "description",
    "whenToUse",
    "tools",
    "disallowedTools",
    "model",
    "permissionMode",
    "maxTurns",
    "skills",
    "mcpServers",
    "hooks",
    "memory",
    "background",
    "isolation",
    "color",
    "effort",
    "initialPrompt",
    "disabled",
    "plugins",
    "agents",
];

/// Why an agent file, or a directory of them, cannot be used. Each message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentFileError {
    /// The file or its directory exists but cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file or directory.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than an agent file may be.
    #[error("{file} is {size} bytes, over the {limit}-byte limit of a settings or agent file")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size, or at least how much was read.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The frontmatter is not YAML, even read as Claude Code reads it.
    #[error("{file}: invalid YAML frontmatter at line {line}, column {column}: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// The line in the file (1-based; 0 when YAML gives none).
        line: usize,
        /// The column (1-based; 0 when YAML gives none).
        column: usize,
        /// What YAML says.
        message: String,
    },
    /// The file opens a frontmatter with `---` and never closes it.
    #[error("{file}: the frontmatter opened by `---` on line 1 has no closing `---` line")]
    UnclosedFrontmatter {
        /// The file.
        file: String,
    },
    /// The frontmatter gives no `description` (Claude Code requires one too).
    #[error(
        "{file}: `description` is missing from the frontmatter: say what the agent is for — the model chooses agents by it"
    )]
    NoDescription {
        /// The file.
        file: String,
    },
    /// The frontmatter is YAML but not a mapping of keys.
    #[error("{file}: `frontmatter` in the file must be a mapping of keys, not {value}")]
    NotAMapping {
        /// The file.
        file: String,
        /// The value found, as written.
        value: String,
    },
    /// A frontmatter key that is not a name (or an `enabled` among a plugin's parameters).
    #[error("{file}: unknown key `{key}` in the frontmatter (known: {expected})")]
    UnknownKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// The keys that are read there.
        expected: &'static str,
    },
    /// A frontmatter key holds a value of the wrong type.
    #[error("{file}: `{key}` in the frontmatter must be {expected}, not {value}")]
    WrongType {
        /// The file.
        file: String,
        /// The key (with an index for a list item: `plugins[1]`).
        key: String,
        /// What it must be.
        expected: &'static str,
        /// The value found, as written.
        value: String,
    },
    /// Two agent files in one directory define one agent name.
    #[error("agent `{name}` is defined by both {first} and {second}")]
    DuplicateAgent {
        /// The name.
        name: String,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
}

/// One agent file, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFile {
    /// The file.
    pub path: PathBuf,
    /// `name`, by default the file stem.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// The plugins it activates, in the order written, each once.
    pub plugins: Vec<String>,
    /// Parameters given in `plugins` (`- name: { params }`), by plugin.
    pub params: BTreeMap<String, Value>,
    /// `tools`: an allow-list of model-visible tool names, as written.
    pub tools: Option<Vec<String>>,
    /// `agents`: the child agents of its roster.
    pub agents: Vec<String>,
    /// Whether `plugins` was written; without it the agent gets the default agent's plugins.
    pub plugins_given: bool,
    /// `model` (Claude Code's agent files): the agent runs on it when the run's provider knows
    /// it (`Host::agent_models`); `inherit`, an alias or an unknown model is the run's.
    pub model: Option<String>,
    /// Other keys (Claude Code's `color`, `effort`, …), kept as metadata and not used.
    pub metadata: BTreeMap<String, Value>,
    /// The body: the agent's instructions.
    pub instructions: String,
}

impl AgentFile {
    /// Reads and parses one agent file.
    pub fn read(path: &Path) -> Result<Self, AgentFileError> {
        let file = || path.display().to_string();
        let text = noeta_core::manifest::read_capped(path, MAX_SETTINGS_BYTES)
            .map_err(|source| AgentFileError::Read {
                file: file(),
                source,
            })?
            .map_err(|size| AgentFileError::TooLarge {
                file: file(),
                size,
                limit: MAX_SETTINGS_BYTES,
            })?;
        Self::parse(&text, path)
    }

    /// Parses the text of the agent file at `path` (which gives the default name and names the
    /// file in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, AgentFileError> {
        let file = path.display().to_string();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let (frontmatter, body) = split_frontmatter(text, &file)?;
        let mut agent = AgentFile {
            path: path.to_owned(),
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            description: None,
            plugins: Vec::new(),
            params: BTreeMap::new(),
            tools: None,
            agents: Vec::new(),
            plugins_given: false,
            model: None,
            metadata: BTreeMap::new(),
            instructions: body.trim_start_matches(['\r', '\n']).trim_end().to_owned(),
        };
        if let Some(yaml) = frontmatter {
            agent.read_frontmatter(yaml, &file)?;
        }
        if agent.name.is_empty() {
            return Err(wrong_type(&file, "name", "a non-empty agent name", "\"\""));
        }
        if agent
            .description
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
        {
            return Err(AgentFileError::NoDescription { file });
        }
        Ok(agent)
    }

    fn read_frontmatter(&mut self, yaml: &str, file: &str) -> Result<(), AgentFileError> {
        let strict = yaml_serde::from_str::<yaml_serde::Value>(yaml);
        let value = match strict {
            Ok(value) => Ok(value),
            // What Claude Code accepts is accepted: a description with an unquoted `: `.
            Err(err) => lenient(yaml).map(yaml_serde::Value::Mapping).ok_or(err),
        };
        let value: yaml_serde::Value = value.map_err(|err| {
            let (line, column) = err
                .location()
                // The YAML starts on the file's second line, after the opening `---`.
                .map_or((0, 0), |l| (l.line() + 1, l.column()));
            // The YAML library's own positions count from the frontmatter, not the file:
            // they are dropped, and the file's line and column given instead.
            let message = if err.location().is_some() {
                without_positions(&err.to_string())
            } else {
                err.to_string()
            };
            AgentFileError::Yaml {
                file: file.to_owned(),
                line,
                column,
                message,
            }
        })?;
        let mapping = match value {
            yaml_serde::Value::Null => return Ok(()),
            yaml_serde::Value::Mapping(mapping) => mapping,
            other => {
                return Err(AgentFileError::NotAMapping {
                    file: file.to_owned(),
                    value: short(&render(&other)),
                });
            }
        };
        for (key, value) in &mapping {
            let Some(key) = key.as_str() else {
                return Err(unknown(file, &render(key)));
            };
            match key {
                "name" => match value.as_str() {
                    Some(name) if !name.trim().is_empty() => self.name = name.trim().to_owned(),
                    _ => {
                        return Err(wrong_type(
                            file,
                            key,
                            "a non-empty agent name",
                            &render(value),
                        ));
                    }
                },
                "description" => match value {
                    yaml_serde::Value::Null => {}
                    yaml_serde::Value::String(s) => self.description = Some(s.clone()),
                    other => return Err(wrong_type(file, key, "a string", &render(other))),
                },
                "plugins" => {
                    self.plugins_given = true;
                    self.read_plugins(value, file)?;
                }
                "model" => match value {
                    yaml_serde::Value::Null => {}
                    yaml_serde::Value::String(s) if !s.trim().is_empty() => {
                        self.model = Some(s.trim().to_owned());
                    }
                    other => return Err(wrong_type(file, key, "a model name", &render(other))),
                },
                "tools" => {
                    self.tools = match value {
                        yaml_serde::Value::Null => None,
                        // `tools: Read, Grep` as Claude Code writes it.
                        yaml_serde::Value::String(s) => Some(
                            s.split(',')
                                .map(str::trim)
                                .filter(|t| !t.is_empty())
                                .map(str::to_owned)
                                .collect(),
                        ),
                        other => Some(names(file, key, other)?),
                    };
                }
                "agents" => {
                    self.agents = match value {
                        yaml_serde::Value::Null => Vec::new(),
                        other => names(file, key, other)?,
                    };
                }
                // Claude Code's other keys (`color`, `effort`, `initialPrompt`, …).
                _ => {
                    let value = yaml_to_json(value, file, key)?;
                    self.metadata.insert(key.to_owned(), value);
                }
            }
        }
        Ok(())
    }

    /// What the host tells the person about this file once: the keys it keeps and does not
    /// use (`None` when there are none).
    pub fn note(&self) -> Option<String> {
        let mut unused: Vec<String> = Vec::new();
        if !self.metadata.is_empty() {
            let keys: Vec<String> = self.metadata.keys().map(|k| format!("`{k}`")).collect();
            unused.push(format!("{} (kept as metadata)", keys.join(", ")));
        }
        (!unused.is_empty()).then(|| {
            format!(
                "agent file {}: not used: {}",
                self.path.display(),
                unused.join("; ")
            )
        })
    }

    fn read_plugins(
        &mut self,
        value: &yaml_serde::Value,
        file: &str,
    ) -> Result<(), AgentFileError> {
        let items = match value {
            yaml_serde::Value::Null => return Ok(()),
            yaml_serde::Value::Sequence(items) => items,
            other => {
                return Err(wrong_type(
                    file,
                    "plugins",
                    "a list of plugin names or one-key maps `name: {params}`",
                    &render(other),
                ));
            }
        };
        let expected = "a plugin name or a one-key map `name: {params}`";
        for (index, item) in items.iter().enumerate() {
            let key = format!("plugins[{index}]");
            let (name, params) = match item {
                yaml_serde::Value::String(name) if !name.trim().is_empty() => {
                    (name.trim().to_owned(), None)
                }
                yaml_serde::Value::Mapping(map) if map.len() == 1 => {
                    let Some((name, params)) = map.iter().next() else {
                        return Err(wrong_type(file, &key, expected, &render(item)));
                    };
                    let Some(name) = name.as_str().filter(|n| !n.trim().is_empty()) else {
                        return Err(wrong_type(file, &key, expected, &render(item)));
                    };
                    let name = name.trim().to_owned();
                    let params = match params {
                        yaml_serde::Value::Null => Map::new(),
                        yaml_serde::Value::Mapping(_) => {
                            match yaml_to_json(params, file, &format!("{key}.{name}"))? {
                                Value::Object(map) => map,
                                _ => Map::new(),
                            }
                        }
                        other => {
                            return Err(wrong_type(
                                file,
                                &format!("{key}.{name}"),
                                "a map of parameters",
                                &render(other),
                            ));
                        }
                    };
                    if params.contains_key("enabled") {
                        return Err(AgentFileError::UnknownKey {
                            file: file.to_owned(),
                            key: format!("{key}.{name}.enabled"),
                            expected: "plugin parameters; list a plugin to activate it, leave it out not to",
                        });
                    }
                    (name, Some(params))
                }
                _ => return Err(wrong_type(file, &key, expected, &render(item))),
            };
            // `tool_search` and `structured_output` come with `react`; they take no item params.
            if name == TOOL_SEARCH || name == STRUCTURED_OUTPUT {
                if params.as_ref().is_some_and(|p| !p.is_empty()) {
                    return Err(wrong_type(
                        file,
                        &format!("{key}.{name}"),
                        "a bare name (it comes with `react`; set `structured_output_schema` in `react`'s parameters)",
                        &render(item),
                    ));
                }
                continue;
            }
            if !self.plugins.contains(&name) {
                self.plugins.push(name.clone());
            }
            if let Some(params) = params.filter(|p| !p.is_empty()) {
                merge_value(
                    self.params.entry(name).or_insert(Value::Null),
                    Value::Object(params),
                );
            }
        }
        Ok(())
    }

    /// The agent as a roster entry of another agent (what `Task` may start).
    pub fn definition(&self) -> noeta_core::AgentDefinition {
        let options = self.options();
        noeta_core::AgentDefinition {
            name: self.name.clone(),
            description: self.description.clone().unwrap_or_default(),
            instructions: self.instructions.clone(),
            tools: options.tools,
            plugins: options.plugins,
            agents: options.agents,
            model: self.model.clone(),
        }
    }

    /// The agent's options: name, instructions, plugins, roster, the allow-list (always with
    /// [`AGENT_FILE_TOOLS`]) and the file's plugin parameters as `config`. Apply settings with
    /// [`crate::Settings::apply_to`], which merges these parameters over `[plugins.*]`.
    pub fn options(&self) -> AgentOptions {
        let mut options = AgentOptions::named(self.name.clone());
        options.instructions = self.instructions.clone();
        // Without `plugins`, the default agent's: `tools` then narrows them (Claude Code's
        // agent files name tools, not plugins).
        options.plugins = if self.plugins_given {
            self.plugins.clone()
        } else {
            crate::conventions::DEFAULT_PLUGINS
                .iter()
                .map(|p| (*p).to_owned())
                .collect()
        };
        options.agents = self.agents.clone();
        options.tools = self.tools.as_ref().map(|tools| {
            let mut tools = tools.clone();
            for tool in AGENT_FILE_TOOLS {
                if !tools.iter().any(|t| t == tool) {
                    tools.push(tool.to_owned());
                }
            }
            tools
        });
        options.config = self.params.clone();
        options
    }
}

/// The directories agent files are read from, lowest first: `~/.noeta/agents`, the
/// workspace's `.claude/agents` (Claude Code's, read for compatibility), then
/// `<workspace>/.noeta/agents` (each once, when the workspace is the home directory).
pub fn agent_file_dirs(paths: &HostPaths) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = paths
        .user_dir()
        .map(|d| d.join("agents"))
        .into_iter()
        .collect();
    for project in [
        paths.workspace.join(".claude").join("agents"),
        paths.workspace.join(".noeta").join("agents"),
    ] {
        if !dirs.contains(&project) {
            dirs.push(project);
        }
    }
    dirs
}

/// The agent files of a host, and those that could not be used.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct AgentFiles {
    /// The files that load, sorted by agent name; a later directory's file wins over an
    /// earlier one's of the same name.
    pub agents: Vec<AgentFile>,
    /// Each file that does not load, with why (the file is named in the error). It fails only
    /// itself.
    pub problems: Vec<(PathBuf, AgentFileError)>,
}

/// Reads every `*.md` in the agent directories ([`agent_file_dirs`]); a file that cannot be
/// read or parsed, or that repeats a name another file of its directory has, is a problem of
/// its own and the others load.
pub fn read_agent_files(paths: &HostPaths) -> AgentFiles {
    let mut found = AgentFiles::default();
    let mut agents: BTreeMap<String, AgentFile> = BTreeMap::new();
    for dir in agent_file_dirs(paths) {
        let files = match markdown_files(&dir) {
            Ok(files) => files,
            Err(err) => {
                found.problems.push((dir, err));
                continue;
            }
        };
        let mut here: BTreeMap<String, AgentFile> = BTreeMap::new();
        for path in files {
            let agent = match AgentFile::read(&path) {
                Ok(agent) => agent,
                Err(err) => {
                    found.problems.push((path, err));
                    continue;
                }
            };
            if let Some(first) = here.get(&agent.name) {
                found.problems.push((
                    path.clone(),
                    AgentFileError::DuplicateAgent {
                        name: agent.name.clone(),
                        first: first.path.display().to_string(),
                        second: path.display().to_string(),
                    },
                ));
                continue;
            }
            here.insert(agent.name.clone(), agent);
        }
        agents.extend(here);
    }
    found.agents = agents.into_values().collect();
    found
}

/// Adds the agent files of a Claude Code plugin's agent directories to `found`, each named
/// `<plugin>:<name>`; a file that does not load is a problem of its own.
pub fn add_plugin_agents(plugin: &str, dirs: &[PathBuf], found: &mut AgentFiles) {
    for dir in dirs {
        let files = match markdown_files(dir) {
            Ok(files) => files,
            Err(err) => {
                found.problems.push((dir.clone(), err));
                continue;
            }
        };
        for path in files {
            match AgentFile::read(&path) {
                Ok(mut agent) => {
                    agent.name = format!("{plugin}:{}", agent.name);
                    if found.agents.iter().any(|a| a.name == agent.name) {
                        continue;
                    }
                    found.agents.push(agent);
                }
                Err(err) => found.problems.push((path, err)),
            }
        }
    }
    found.agents.sort_by(|a, b| a.name.cmp(&b.name));
}

/// [`read_agent_files`], all or nothing: the agents, or the first problem (for checks that
/// want every file sound).
pub fn load_agent_files(paths: &HostPaths) -> Result<Vec<AgentFile>, AgentFileError> {
    let found = read_agent_files(paths);
    match found.problems.into_iter().next() {
        Some((_, err)) => Err(err),
        None => Ok(found.agents),
    }
}

/// The `*.md` files directly in `dir`, sorted (none when `dir` does not exist).
fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>, AgentFileError> {
    let read_err = |source| AgentFileError::Read {
        file: dir.display().to_string(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(read_err(err)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(read_err)?.path();
        if path.extension().is_some_and(|e| e == "md") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// `text` without its ` at line N column M` parts.
fn without_positions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" at line ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " at line ".len()..];
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let line_end = digits(after);
        let tail = &after[line_end..];
        rest = match tail.strip_prefix(" column ") {
            Some(column) if line_end > 0 => &column[digits(column)..],
            _ => {
                out.push_str(" at line ");
                after
            }
        };
    }
    out.push_str(rest);
    out
}

/// The frontmatter read as Claude Code reads it when it is not strict YAML: each line that
/// starts a top-level `key:` opens an entry, the lines under it continue it. Under a
/// plain-text key (`description`), `<example>` … `</example>` blocks and lines starting with
/// a word that is no frontmatter key (`Context: …`, `user: "…"`) continue the text, so a
/// description ending in `Examples:` followed by unindented examples is one description. Each
/// entry is parsed as YAML on its own; a description that still fails is taken as plain text.
/// `None` when that does not work either (a key given twice, another key's value unreadable).
fn lenient(yaml: &str) -> Option<yaml_serde::Mapping> {
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut in_example = false;
    for line in yaml.lines() {
        let in_text = entries
            .last()
            .is_some_and(|(key, _)| PLAIN_TEXT_KEYS.contains(&key.as_str()));
        if in_text && line.trim_start().starts_with("<example") {
            in_example = true;
        }
        let starts_key = !line.starts_with([' ', '\t', '#', '-'])
            && line.split_once(':').is_some_and(|(key, rest)| {
                !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    && (rest.is_empty() || rest.starts_with([' ', '\t']))
                    && !(in_text && (in_example || !FRONTMATTER_KEYS.contains(&key)))
            });
        if line.contains("</example>") {
            in_example = false;
        }
        match line.split_once(':') {
            Some((key, rest)) if starts_key => entries.push((key.to_owned(), rest.to_owned())),
            _ => {
                let (_, value) = entries.last_mut()?;
                value.push('\n');
                value.push_str(line);
            }
        }
    }
    let mut mapping = yaml_serde::Mapping::new();
    for (key, value) in entries {
        let parsed = yaml_serde::from_str::<yaml_serde::Value>(&format!("{key}:{value}"))
            .ok()
            .and_then(|v| v.get(key.as_str()).cloned());
        let value = match parsed {
            Some(value) => value,
            None if PLAIN_TEXT_KEYS.contains(&key.as_str()) => {
                let lines: Vec<&str> = value.lines().map(str::trim).collect();
                yaml_serde::Value::String(lines.join("\n").trim().to_owned())
            }
            None => return None,
        };
        if mapping
            .insert(yaml_serde::Value::String(key), value)
            .is_some()
        {
            return None;
        }
    }
    Some(mapping)
}

/// Splits `---` frontmatter off: `(Some(yaml), body)`, the YAML starting on the file's second
/// line, or `(None, text)` when the text does not open with a `---` line.
fn split_frontmatter<'t>(
    text: &'t str,
    file: &str,
) -> Result<(Option<&'t str>, &'t str), AgentFileError> {
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return Ok((None, text));
    };
    if first.trim_end() != "---" {
        return Ok((None, text));
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if line.trim_end() == "---" {
            let yaml = &text[start..offset];
            let body = &text[offset + line.len()..];
            return Ok((Some(yaml), body));
        }
        offset += line.len();
    }
    Err(AgentFileError::UnclosedFrontmatter {
        file: file.to_owned(),
    })
}

fn unknown(file: &str, key: &str) -> AgentFileError {
    AgentFileError::UnknownKey {
        file: file.to_owned(),
        key: key.to_owned(),
        expected: KNOWN_KEYS,
    }
}

fn wrong_type(file: &str, key: &str, expected: &'static str, value: &str) -> AgentFileError {
    AgentFileError::WrongType {
        file: file.to_owned(),
        key: key.to_owned(),
        expected,
        value: short(value),
    }
}

/// A YAML value on one line, for an error message.
fn render(value: &yaml_serde::Value) -> String {
    match value {
        yaml_serde::Value::String(s) => format!("{s:?}"),
        other => yaml_to_json(other, "", "")
            .map(|v| v.to_string())
            .or_else(|_| yaml_serde::to_string(other).map(|s| s.trim().to_owned()))
            .unwrap_or_else(|_| "a value".to_owned()),
    }
}

/// A list of names (`tools`, `agents`).
fn names(file: &str, key: &str, value: &yaml_serde::Value) -> Result<Vec<String>, AgentFileError> {
    let expected = "a list of names";
    let yaml_serde::Value::Sequence(items) = value else {
        return Err(wrong_type(file, key, expected, &render(value)));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str()
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_owned())
                .ok_or_else(|| wrong_type(file, &format!("{key}[{i}]"), "a name", &render(item)))
        })
        .collect()
}

/// A YAML value as JSON; `key` is where it sits, for errors.
fn yaml_to_json(value: &yaml_serde::Value, file: &str, key: &str) -> Result<Value, AgentFileError> {
    Ok(match value {
        yaml_serde::Value::Null => Value::Null,
        yaml_serde::Value::Bool(b) => Value::Bool(*b),
        yaml_serde::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| wrong_type(file, key, "a finite number", &n.to_string()))?
            }
        }
        yaml_serde::Value::String(s) => Value::String(s.clone()),
        yaml_serde::Value::Sequence(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| yaml_to_json(item, file, &format!("{key}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        yaml_serde::Value::Mapping(map) => {
            let mut object = Map::new();
            for (k, v) in map {
                let Some(k) = k.as_str() else {
                    return Err(wrong_type(
                        file,
                        key,
                        "a map with string keys",
                        &format!("{k:?}"),
                    ));
                };
                object.insert(k.to_owned(), yaml_to_json(v, file, &format!("{key}.{k}"))?);
            }
            Value::Object(object)
        }
        yaml_serde::Value::Tagged(tagged) => {
            return Err(wrong_type(
                file,
                key,
                "an untagged value",
                &format!("!{}", tagged.tag),
            ));
        }
    })
}
