//! Tool search (the `tool_search` extension): deferred tools stay out of the request until
//! the model finds them with `ToolSearch`.
//!
//! A tool flagged `deferred` is held back by the runner. While any offered tool
//! is, this extension adds `ToolSearch`, whose calls match the held-back tools
//! by name, `search_hint` and description (or pick them outright with
//! `select:Name,Other`), and record what they load (`tool_search` /
//! `loaded`). Every step the extension adds the loaded tools back, so they stay
//! loaded for the rest of the task, across crashes and workers.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use noeta_core::extension::{Extension, HookResult, OfferedTool, ToolChanges, View};
use noeta_core::records::ERASED_KIND;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

/// The extension's name (its records and state live under it).
pub const TOOL_SEARCH: &str = "tool_search";
/// The tool's model-visible name.
const NAME: &str = "ToolSearch";
/// Matches one search returns by default, and at most.
const DEFAULT_RESULTS: u64 = 5;
const MAX_RESULTS: u64 = 20;

/// What the search knows of one held-back tool.
struct Candidate {
    name: String,
    description: String,
    hint: String,
}

impl Candidate {
    /// How well `words` match: the whole name, then words in the name, the hint, the description.
    fn score(&self, query: &str, words: &[String]) -> u32 {
        let name = self.name.to_lowercase();
        let hint = self.hint.to_lowercase();
        let description = self.description.to_lowercase();
        let mut score = if name == query { 100 } else { 0 };
        for word in words {
            if name.contains(word.as_str()) {
                score += 10;
            }
            if hint.contains(word.as_str()) {
                score += 5;
            }
            if description.contains(word.as_str()) {
                score += 1;
            }
        }
        score
    }
}

/// The `ToolSearch` tool over this step's held-back tools.
struct ToolSearch {
    candidates: Vec<Candidate>,
}

#[async_trait]
impl Tool for ToolSearch {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Finds and loads tools that are available but not yet in your tool list. Search with keywords (\"deploy release\"), or load tools by exact name with \"select:Name,Other\". Loaded tools can be called from your next reply on, for the rest of the task."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": { "type": "string", "minLength": 1, "description": "Keywords, or select:Name,Other to load tools by name." },
                "max_results": { "type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many tools to load at most (default 5)." }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        // The way to the tools the agent's list admits but holds back: never dropped by it.
        ToolFlags::default()
            .safe_while_planning()
            .retry_safe()
            .past_agent_lists()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim();
        let limit = input
            .get("max_results")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_RESULTS) as usize;
        let found: Vec<&Candidate> = if let Some(names) = query.strip_prefix("select:") {
            let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
            let unknown: Vec<&str> = wanted
                .iter()
                .copied()
                .filter(|w| !self.candidates.iter().any(|c| c.name == *w))
                .collect();
            if !unknown.is_empty() {
                return Err(ToolError::RespondToModel(format!(
                    "{NAME}: no tool to load named {} (available: {})",
                    unknown
                        .iter()
                        .map(|u| format!("`{u}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.available()
                )));
            }
            self.candidates
                .iter()
                .filter(|c| wanted.contains(&c.name.as_str()))
                .collect()
        } else {
            let lowered = query.to_lowercase();
            let words: Vec<String> = lowered.split_whitespace().map(str::to_owned).collect();
            let mut scored: Vec<(u32, &Candidate)> = self
                .candidates
                .iter()
                .map(|c| (c.score(&lowered, &words), c))
                .filter(|(score, _)| *score > 0)
                .collect();
            scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
            scored.into_iter().take(limit).map(|(_, c)| c).collect()
        };
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No tool matches `{query}`. Available to load: {}",
                self.available()
            )));
        }
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        ctx.record(TOOL_SEARCH, "loaded", json!({ "names": names }));
        let lines: Vec<String> = found
            .iter()
            .map(|c| {
                let first = c.description.lines().next().unwrap_or_default();
                format!("- `{}`: {first}", c.name)
            })
            .collect();
        Ok(ToolOutput::text(format!(
            "Loaded {} tool(s); call them from your next reply on:\n{}",
            found.len(),
            lines.join("\n")
        )))
    }
}

impl ToolSearch {
    fn available(&self) -> String {
        if self.candidates.is_empty() {
            "none (every tool is already loaded)".to_owned()
        } else {
            self.candidates
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The `tool_search` extension.
#[derive(Default)]
pub(crate) struct Search {
    /// The last `ToolSearch` built, for the same held-back tools.
    last: Mutex<Option<Built>>,
}

/// A `ToolSearch` and the held-back tools it was built over (held, so their identity is
/// never reused by another tool).
type Built = (Vec<Arc<dyn Tool>>, Arc<dyn Tool>);

impl Search {
    fn loaded(view: &View<'_>) -> BTreeSet<String> {
        view.ext_state(TOOL_SEARCH)
            .and_then(|s| s.get("loaded"))
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `ToolSearch` over `held` (the held-back tools): the last one built while they are
    /// the same tools, so an unchanged offer costs no copying and keeps one rendering.
    fn tool_for(&self, held: Vec<Arc<dyn Tool>>) -> Arc<dyn Tool> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((known, tool)) = last.as_ref()
            && known.len() == held.len()
            && known.iter().zip(&held).all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return Arc::clone(tool);
        }
        let candidates = held
            .iter()
            .map(|tool| Candidate {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                hint: tool.flags().search_hint.unwrap_or_default(),
            })
            .collect();
        let tool: Arc<dyn Tool> = Arc::new(ToolSearch { candidates });
        *last = Some((held, Arc::clone(&tool)));
        tool
    }
}

#[async_trait]
impl Extension for Search {
    fn name(&self) -> &str {
        TOOL_SEARCH
    }

    fn tool_changes(&self, view: &View<'_>, offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        let loaded = Self::loaded(view);
        let mut changes = ToolChanges::none();
        let mut held = Vec::new();
        for entry in offered.iter().filter(|o| o.deferred) {
            if loaded.contains(entry.tool.name()) {
                changes.add.push(Arc::clone(&entry.tool));
            } else {
                held.push(Arc::clone(&entry.tool));
            }
        }
        if !held.is_empty() {
            changes.add.push(self.tool_for(held));
        }
        Ok(changes)
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            "loaded" => {
                let mut loaded: BTreeSet<String> = state
                    .get("loaded")
                    .and_then(Value::as_array)
                    .map(|n| {
                        n.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let names = data
                    .get("names")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("a `loaded` record has no `names` list ({data})"))?;
                loaded.extend(names.iter().filter_map(|n| n.as_str().map(str::to_owned)));
                *state = json!({ "loaded": loaded });
            }
            ERASED_KIND => {}
            other => return Err(format!("unknown record kind `{other}`")),
        }
        Ok(())
    }
}
