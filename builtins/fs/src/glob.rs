//! `Glob`: files matching a pattern, newest first, over a gitignore-aware walk.

use std::path::{Component, Path};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use globset::GlobBuilder;
use ignore::WalkBuilder;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::paths::{Workspace, described, fail, off_thread, reading_flags};
use crate::settings::Settings;

const NAME: &str = "Glob";
/// The most paths one call lists.
pub(crate) const MAX_MATCHES: usize = 200;

const DESCRIPTION: &str = "\
Find files by name pattern, such as `**/*.rs` or `src/**/*.toml`. `*` matches within one path \
segment and `**` across directories. The pattern is relative to `path` (a directory of the \
workspace, default its root); it may not start with `/` or contain `..`. Files ignored by \
.gitignore and hidden files are skipped. Paths are listed relative to the workspace root, most \
recently modified first, at most 200.";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    path: Option<String>,
}

/// The `Glob` tool.
pub(crate) struct Glob {
    settings: Arc<Settings>,
    description: String,
}

impl Glob {
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        let description = described(DESCRIPTION, &settings.write_roots);
        Self {
            settings,
            description,
        }
    }
}

#[async_trait]
impl Tool for Glob {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob to match, relative to `path`"},
                "path": {"type": "string", "description": "The directory to search (default: the workspace root)"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        reading_flags(100_000)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: Input = serde_json::from_value(input)
            .map_err(|err| fail(NAME, format!("invalid input: {err}")))?;
        let pattern = input.pattern;
        if pattern.starts_with('/')
            || Path::new(&pattern)
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
        {
            return Err(fail(
                NAME,
                format!(
                    "the pattern `{pattern}` must be relative to the search directory (no leading `/`, no `..`); set `path` to search elsewhere in the workspace"
                ),
            ));
        }
        let matcher = GlobBuilder::new(&pattern)
            .literal_separator(true)
            .build()
            .map_err(|err| fail(NAME, format!("invalid pattern `{pattern}`: {err}")))?
            .compile_matcher();
        let ws = Workspace::of(ctx, NAME)?.with_roots(&self.settings.write_roots);
        let base = ws.resolve(NAME, input.path.as_deref().unwrap_or("."))?;
        match std::fs::metadata(&base.abs) {
            Err(_) => return Ok(ToolOutput::text("No files found")),
            Ok(meta) if !meta.is_dir() => {
                return Err(fail(NAME, format!("`{}` is not a directory", base.rel)));
            }
            Ok(_) => {}
        }
        let found = off_thread(NAME, move |cancelled| {
            let mut found: Vec<(SystemTime, String)> = Vec::new();
            for entry in walker(&base.abs, false).build().flatten() {
                if cancelled.is_set() {
                    break;
                }
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                let path = entry.path();
                let Ok(under_base) = path.strip_prefix(&base.abs) else {
                    continue;
                };
                if matcher.is_match(under_base) {
                    let modified = entry
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    found.push((modified, ws.relative(path)));
                }
            }
            found
        })
        .await?;
        Ok(ToolOutput::text(render(found)))
    }
}

/// The listing: newest first (then by path), capped at [`MAX_MATCHES`].
fn render(mut found: Vec<(SystemTime, String)>) -> String {
    if found.is_empty() {
        return "No files found".to_owned();
    }
    found.sort_by(|(ta, pa), (tb, pb)| tb.cmp(ta).then_with(|| pa.cmp(pb)));
    let total = found.len();
    let mut out: Vec<String> = found
        .into_iter()
        .take(MAX_MATCHES)
        .map(|(_, p)| p)
        .collect();
    if total > MAX_MATCHES {
        out.push(format!(
            "(Results are truncated: showing the {MAX_MATCHES} most recently modified of {total} files; use a more specific pattern or path)"
        ));
    }
    out.join("\n")
}

/// The walk both search tools share: .gitignore, .ignore and .git/info/exclude honoured (in a
/// git repository or not), hidden files skipped, symlinks not followed; `unrestricted` lifts
/// the ignore rules and shows hidden files. The user's global gitignore is not read, so results
/// do not depend on the machine.
pub(crate) fn walker(base: &Path, unrestricted: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(base);
    builder
        .hidden(!unrestricted)
        .ignore(!unrestricted)
        .git_ignore(!unrestricted)
        .git_exclude(!unrestricted)
        .parents(!unrestricted)
        .git_global(false)
        .require_git(false)
        .follow_links(false);
    builder
}
