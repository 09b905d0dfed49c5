//! The memory tools: `memory_write`, `memory_read`, `memory_search` and `memory_archive`.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::store::Clock;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};
use yaml_serde::Value as Yaml;

use crate::frontmatter::{Document, TYPES, normalize_body};
use crate::matcher::{rank, shown_line, similarity, terms};
use crate::store::{Store, check_name, close_names};
use noeta_toolkit::dates::rfc3339_utc;

/// The most memories one search shows.
pub(crate) const MAX_SEARCH_HITS: usize = 10;
/// The most matching lines shown per memory.
pub(crate) const MAX_LINES_PER_HIT: usize = 3;
/// The most characters of a matching line shown.
pub(crate) const MAX_LINE_CHARS: usize = 200;
/// The most close names an unknown name is answered with.
const MAX_CLOSE_NAMES: usize = 10;
/// The most near-duplicates a write mentions.
const MAX_NEAR_DUPLICATES: usize = 5;
/// How similar two names must be to count as near-duplicates.
const NAME_SIMILARITY: f64 = 0.8;
/// How similar two descriptions must be to count as near-duplicates.
const DESCRIPTION_SIMILARITY: f64 = 0.85;

fn refuse(message: String) -> ToolError {
    ToolError::RespondToModel(message)
}

/// A required string field of the input.
fn required<'a>(tool: &str, input: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    match input.get(field) {
        Some(Value::String(text)) => Ok(text),
        None | Some(Value::Null) => Err(refuse(format!("{tool}: {field} is missing"))),
        Some(other) => Err(refuse(format!("{tool}: {field} `{other}` is not a string"))),
    }
}

/// An optional string field; an empty one counts as not given.
fn optional<'a>(tool: &str, input: &'a Value, field: &str) -> Result<Option<&'a str>, ToolError> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(refuse(format!("{tool}: {field} `{other}` is not a string"))),
    }
}

/// The answer to a name that names no memory: the close names, if any.
fn unknown(tool: &str, store: &Store, name: &str) -> ToolError {
    let names = store.names().unwrap_or_default();
    let close = close_names(&names, name, MAX_CLOSE_NAMES);
    if close.is_empty() {
        refuse(format!(
            "{tool}: no memory named `{name}` (no close names; memory_search finds memories by their content)"
        ))
    } else {
        refuse(format!(
            "{tool}: no memory named `{name}`; close names: {}",
            close.join(", ")
        ))
    }
}

fn name_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "description": "The memory's name: a letter or digit, then letters, digits, `_`, `.` or `-` (it is the file name, without `.md`)"
    })
}

/// The input of a tool that takes one memory's name and nothing else.
fn name_only_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "name": name_schema() },
        "required": ["name"],
        "additionalProperties": false
    })
}

/// Creates or updates a memory.
pub(crate) struct MemoryWrite {
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
}

impl MemoryWrite {
    pub(crate) fn new(store: Arc<Store>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }
}

#[async_trait]
impl Tool for MemoryWrite {
    fn name(&self) -> &str {
        "memory_write"
    }

    fn description(&self) -> &str {
        "Save a memory for later tasks, or update one. A new memory needs `text` (its markdown body); give it a one-line `description` that says when it is useful, a `type` and a few `keywords`. To update, give the existing name and only what changes: fields left out (or empty) are kept, and an empty `text` keeps the body. Search first and update a memory on the same subject rather than adding a near-duplicate."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": name_schema(),
                "text": {
                    "type": "string",
                    "description": "The markdown body; empty keeps the body of an existing memory"
                },
                "description": {
                    "type": "string",
                    "description": "One line saying what the memory holds and when it is useful"
                },
                "type": {
                    "type": "string",
                    "enum": ["user", "project", "procedural", "reference", ""],
                    "description": "user (the user's preferences), project (decisions about this project), procedural (how to do something), reference (where to find something)"
                },
                "keywords": {
                    "type": "string",
                    "description": "Comma-separated words search and recall should find the memory by"
                },
                "related": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Names of related memories"
                }
            },
            "required": ["name", "text"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default().with_risk(Risk::Medium)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const TOOL: &str = "memory_write";
        let name = required(TOOL, &input, "name")?;
        check_name(TOOL, name).map_err(refuse)?;
        let text = required(TOOL, &input, "text")?;
        let description = optional(TOOL, &input, "description")?;
        let kind = optional(TOOL, &input, "type")?;
        if let Some(kind) = kind
            && !TYPES.contains(&kind)
        {
            return Err(refuse(format!(
                "{TOOL}: type `{kind}` is not one of {}",
                TYPES.join(", ")
            )));
        }
        let keywords = optional(TOOL, &input, "keywords")?;
        let related = match input.get("related") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) if items.is_empty() => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            refuse(format!("{TOOL}: related entry `{item}` is not a string"))
                        })
                    })
                    .collect::<Result<Vec<String>, ToolError>>()?,
            ),
            Some(other) => {
                return Err(refuse(format!(
                    "{TOOL}: related `{other}` is not a list of names"
                )));
            }
        };

        let existing = self
            .store
            .load(name)
            .map_err(|err| refuse(format!("{TOOL}: {err}; fix the file or archive it")))?;
        let created = existing.is_none();
        let body = normalize_body(text);
        if created && body.is_empty() {
            return Err(refuse(format!(
                "{TOOL}: memory `{name}` does not exist and text is empty; a new memory needs a body"
            )));
        }
        let now = rfc3339_utc(self.clock.now_ms());
        let mut doc = existing.unwrap_or_default();
        let mut changed: Vec<&str> = Vec::new();
        let mut set = |key: &'static str, value: Yaml, changed: &mut Vec<&str>| {
            doc.front.insert(Yaml::String(key.to_owned()), value);
            changed.push(key);
        };
        if let Some(description) = description {
            set(
                "description",
                Yaml::String(description.to_owned()),
                &mut changed,
            );
        }
        if let Some(kind) = kind {
            set("type", Yaml::String(kind.to_owned()), &mut changed);
        }
        if let Some(keywords) = keywords {
            set("keywords", Yaml::String(keywords.to_owned()), &mut changed);
        }
        if let Some(related) = related {
            let list = related.into_iter().map(Yaml::String).collect();
            set("related", Yaml::Sequence(list), &mut changed);
        }
        if created {
            set("created", Yaml::String(now.clone()), &mut changed);
            set(
                "source_task",
                Yaml::String(ctx.task_id().to_owned()),
                &mut changed,
            );
        }
        set("updated", Yaml::String(now), &mut changed);
        if !body.is_empty() {
            doc.body = body;
            changed.push("body");
        }
        let rendered = doc
            .render()
            .map_err(|err| refuse(format!("{TOOL}: memory `{name}`: {err}")))?;
        self.store.write(name, &rendered).map_err(|err| {
            refuse(format!(
                "{TOOL}: memory `{name}` could not be written to {}: {err}",
                self.store.path(name).display()
            ))
        })?;

        let mut summary = if created {
            format!("Created memory `{name}` ({} bytes).", rendered.len())
        } else {
            let fields: Vec<&str> = changed
                .iter()
                .copied()
                .filter(|f| *f != "updated")
                .collect();
            format!(
                "Updated memory `{name}` ({}; {} bytes).",
                if fields.is_empty() {
                    "only its timestamp".to_owned()
                } else {
                    format!("changed: {}", fields.join(", "))
                },
                rendered.len()
            )
        };
        let near = self.near_duplicates(name, &doc.description());
        if !near.is_empty() {
            summary.push_str(&format!(
                "\nSimilar memories exist: {}. If they cover the same subject, merge them into one and archive the rest.",
                near.join(", ")
            ));
        }
        Ok(ToolOutput::text(summary))
    }
}

impl MemoryWrite {
    /// Other memories whose name or description is very like these, each with why.
    fn near_duplicates(&self, name: &str, description: &str) -> Vec<String> {
        let Ok(memories) = self.store.list() else {
            return Vec::new();
        };
        let mut found: Vec<(f64, String)> = Vec::new();
        for memory in memories.iter().filter(|m| m.name != name) {
            let by_name = similarity(&memory.name, name);
            let other = memory
                .doc
                .as_ref()
                .map(Document::description)
                .unwrap_or_default();
            let by_description = similarity(&other, description);
            if by_name >= NAME_SIMILARITY {
                found.push((by_name, format!("`{}` (similar name)", memory.name)));
            } else if by_description >= DESCRIPTION_SIMILARITY {
                found.push((
                    by_description,
                    format!("`{}` (similar description)", memory.name),
                ));
            }
        }
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        found
            .into_iter()
            .take(MAX_NEAR_DUPLICATES)
            .map(|(_, text)| text)
            .collect()
    }
}

/// Reads one memory whole.
pub(crate) struct MemoryRead {
    store: Arc<Store>,
}

impl MemoryRead {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Tool for MemoryRead {
    fn name(&self) -> &str {
        "memory_read"
    }

    fn description(&self) -> &str {
        "Read one memory whole: its frontmatter (description, type, keywords, related, timestamps) and its markdown body."
    }

    fn input_schema(&self) -> Value {
        name_only_schema()
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only().clearable()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const TOOL: &str = "memory_read";
        let name = required(TOOL, &input, "name")?;
        check_name(TOOL, name).map_err(refuse)?;
        match self.store.read_text(name) {
            Ok(Some(text)) => Ok(ToolOutput::text(text)),
            Ok(None) => Err(unknown(TOOL, &self.store, name)),
            Err(err) => Err(refuse(format!("{TOOL}: {err}"))),
        }
    }
}

/// Finds memories by words.
pub(crate) struct MemorySearch {
    store: Arc<Store>,
}

impl MemorySearch {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Tool for MemorySearch {
    fn name(&self) -> &str {
        "memory_search"
    }

    fn description(&self) -> &str {
        "Find memories by words (case-insensitive) in their names, descriptions, keywords and bodies. Shows at most 10 memories, best match first, each with up to 3 matching lines (numbered as in the file). Read a memory whole with memory_read."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Words to look for; a memory matching more of them, or in its name, ranks higher"
                }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only().clearable()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const TOOL: &str = "memory_search";
        let query = required(TOOL, &input, "query")?;
        let terms = terms(query);
        if terms.is_empty() {
            return Err(refuse(format!(
                "{TOOL}: query `{query}` has no words to search for"
            )));
        }
        let memories = self.store.list().map_err(|err| {
            refuse(format!(
                "{TOOL}: the memory directory {} could not be listed: {err}",
                self.store.dir().display()
            ))
        })?;
        let hits = rank(&memories, &terms);
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!("No memory matches `{query}`.")));
        }
        let mut out = if hits.len() > MAX_SEARCH_HITS {
            format!(
                "{} memories match `{query}`; the best {MAX_SEARCH_HITS} follow (narrow the query to see others):",
                hits.len()
            )
        } else if hits.len() == 1 {
            format!("1 memory matches `{query}`:")
        } else {
            format!("{} memories match `{query}`, best first:", hits.len())
        };
        for hit in hits.iter().take(MAX_SEARCH_HITS) {
            out.push_str("\n\n");
            out.push_str(&hit.name);
            if !hit.description.is_empty() {
                out.push_str(" — ");
                out.push_str(&shown_line(&hit.description, MAX_LINE_CHARS));
            }
            for (line_no, line) in hit.lines.iter().take(MAX_LINES_PER_HIT) {
                out.push_str(&format!(
                    "\n  {line_no}: {}",
                    shown_line(line, MAX_LINE_CHARS)
                ));
            }
        }
        Ok(ToolOutput::text(out))
    }
}

/// Moves a memory into `archive/`.
pub(crate) struct MemoryArchive {
    store: Arc<Store>,
}

impl MemoryArchive {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Tool for MemoryArchive {
    fn name(&self) -> &str {
        "memory_archive"
    }

    fn description(&self) -> &str {
        "Archive a memory that is wrong, stale or merged into another: it moves to the archive and is no longer listed, searched or recalled."
    }

    fn input_schema(&self) -> Value {
        name_only_schema()
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default().with_risk(Risk::Medium)
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const TOOL: &str = "memory_archive";
        let name = required(TOOL, &input, "name")?;
        check_name(TOOL, name).map_err(refuse)?;
        if !self.store.path(name).is_file() {
            return Err(unknown(TOOL, &self.store, name));
        }
        let target = self.store.archive(name).map_err(|err| {
            refuse(format!(
                "{TOOL}: memory `{name}` could not be archived: {err}"
            ))
        })?;
        let shown = target
            .strip_prefix(self.store.dir())
            .unwrap_or(&target)
            .display()
            .to_string();
        Ok(ToolOutput::text(format!(
            "Archived memory `{name}` (moved to {shown}); it is no longer listed, searched or recalled."
        )))
    }
}
