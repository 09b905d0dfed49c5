//! `Edit` and `Write`: changing files, read-first, dry-run unless `write_mode = "apply"`.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::canonical::sha256_hex;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use similar::TextDiff;

use crate::paths::{Target, Workspace, described, fail, numbered};
use crate::read::{not_text, text_of};
use crate::registry::{EXTENSION, check_read};
use crate::settings::{Settings, WriteMode};

/// The largest content `Write` accepts.
pub(crate) const MAX_WRITE_BYTES: usize = 8 * 1024 * 1024;
/// Diffs larger than this are not kept in a `write` record.
const MAX_RECORDED_DIFF_BYTES: usize = 256 * 1024;
/// Lines shown around an applied edit.
const SNIPPET_RADIUS: usize = 4;

const EDIT_DESCRIPTION: &str = "\
Replace an exact string in a text file of the workspace. Read the file first: an edit of a file \
never read, or changed since it was read, is refused. `old_string` must match the file exactly \
(indentation included) and only once, unless `replace_all` is set; give more surrounding lines \
to make it unique. `new_string` must differ from it. Line endings follow the file's.";

const WRITE_DESCRIPTION: &str = "\
Write a text file of the workspace, creating it (and its directories) or replacing it whole. \
To replace an existing file, Read it first; prefer Edit for changes to part of a file. Content \
is at most 8 MiB.";

/// The edit tools' shared flags: high risk, old outputs clearable.
fn write_flags() -> ToolFlags {
    ToolFlags::default()
        .with_risk(Risk::High)
        .clearable()
        .with_max_result_chars(100_000)
}

/// Refuses a workspace path outside the `write_path_globs` allow-list (which does not
/// restrict the write roots).
fn check_allowed(settings: &Settings, tool: &str, target: &Target) -> Result<(), ToolError> {
    let rel = &target.rel;
    match &settings.write_globs {
        Some((set, texts)) if !target.in_write_root && !set.is_match(rel) => Err(fail(
            tool,
            format!(
                "`{rel}` is not in the paths this agent may write (write_path_globs: {})",
                texts.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// Where a change's diff is kept: in the task's content store (`text/x-diff`), the record
/// naming it by its ref; called directly, without a store, inline up to 256 KiB.
async fn kept_diff(ctx: &ToolContext, diff: &str) -> Result<Value, ToolError> {
    match ctx.put_content("text/x-diff", diff.as_bytes()).await {
        Some(Ok(reference)) => Ok(json!(reference)),
        Some(Err(err)) => Err(ToolError::Fatal(format!(
            "cannot keep the diff in the content store: {err}"
        ))),
        None => Ok(if diff.len() <= MAX_RECORDED_DIFF_BYTES {
            json!(diff)
        } else {
            Value::Null
        }),
    }
}

/// A unified diff of `before` → `after` for `rel` (`a/`, `b/` before a workspace path; an
/// absolute path as it is).
fn diff(rel: &str, before: &str, after: &str) -> String {
    let (old, new) = if rel.starts_with('/') {
        (rel.to_owned(), rel.to_owned())
    } else {
        (format!("a/{rel}"), format!("b/{rel}"))
    };
    TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&old, &new)
        .to_string()
}

/// The dry-run notice that leads a result when nothing was written.
fn not_written(rel: &str) -> String {
    format!(
        "NOT WRITTEN: write_mode is dry_run, so `{rel}` was left unchanged on disk. This is what the call would do:"
    )
}

/// Writes `content` to the target, creating its directories.
fn store(tool: &str, target: &Target, content: &str) -> Result<(), ToolError> {
    if let Some(parent) = target.abs.parent() {
        std::fs::create_dir_all(parent).map_err(|err| {
            fail(
                tool,
                format!("cannot create the directories of `{}`: {err}", target.rel),
            )
        })?;
    }
    std::fs::write(&target.abs, content)
        .map_err(|err| fail(tool, format!("cannot write `{}`: {err}", target.rel)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// The `Edit` tool.
pub(crate) struct Edit {
    settings: Arc<Settings>,
    description: String,
}

impl Edit {
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        let description = described(EDIT_DESCRIPTION, &settings.write_roots);
        Self {
            settings,
            description,
        }
    }
}

const EDIT: &str = "Edit";

#[async_trait]
impl Tool for Edit {
    fn name(&self) -> &str {
        EDIT
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to change, relative to the workspace root"},
                "old_string": {"type": "string", "description": "The exact text to replace"},
                "new_string": {"type": "string", "description": "The text to put in its place"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        write_flags()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: EditInput = serde_json::from_value(input)
            .map_err(|err| fail(EDIT, format!("invalid input: {err}")))?;
        if input.old_string == input.new_string {
            return Err(fail(
                EDIT,
                "No changes to make: old_string and new_string are exactly the same.",
            ));
        }
        if input.old_string.is_empty() {
            return Err(fail(
                EDIT,
                "old_string is empty; to create a file or replace it whole, use Write",
            ));
        }
        let ws = Workspace::of(ctx, EDIT)?.with_roots(&self.settings.write_roots);
        let target = ws.resolve(EDIT, &input.file_path)?;
        let rel = target.rel.clone();
        check_allowed(&self.settings, EDIT, &target)?;
        let meta = std::fs::metadata(&target.abs).map_err(|_| {
            fail(
                EDIT,
                format!("file `{rel}` does not exist; use Write to create it"),
            )
        })?;
        if meta.is_dir() {
            return Err(fail(EDIT, format!("`{rel}` is a directory, not a file")));
        }
        crate::paths::regular(EDIT, &rel, &meta)?;
        let bytes = std::fs::read(&target.abs)
            .map_err(|err| fail(EDIT, format!("cannot read `{rel}`: {err}")))?;
        let before_digest = sha256_hex(&bytes);
        check_read(ctx, EDIT, &rel, &before_digest)?;
        let before = text_of(&bytes).ok_or_else(|| not_text(EDIT, &rel))?;

        // A file with CRLF endings keeps them when the strings are written with LF.
        let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        let (old, new) = if before.contains("\r\n")
            && !input.old_string.contains('\r')
            && before.contains(&crlf(&input.old_string))
        {
            (crlf(&input.old_string), crlf(&input.new_string))
        } else {
            (input.old_string.clone(), input.new_string.clone())
        };
        let found = before.matches(old.as_str()).count();
        if found == 0 {
            return Err(fail(
                EDIT,
                format!(
                    "String to replace not found in file.\nString: {}",
                    input.old_string
                ),
            ));
        }
        if found > 1 && !input.replace_all {
            return Err(fail(
                EDIT,
                format!(
                    "Found {found} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance."
                ),
            ));
        }
        let first_at = before.find(old.as_str()).unwrap_or(0);
        let after = if input.replace_all {
            before.replace(old.as_str(), &new)
        } else {
            before.replacen(old.as_str(), &new, 1)
        };
        let change = diff(&rel, before, &after);
        // Kept before the file changes, so a store that fails leaves the file as it was.
        let kept = kept_diff(ctx, &change).await?;
        let after_digest = sha256_hex(after.as_bytes());
        let applied = self.settings.write_mode == WriteMode::Apply;
        if applied {
            store(EDIT, &target, &after)?;
        }
        ctx.record(
            EXTENSION,
            "edit",
            json!({
                "path": rel,
                "before": before_digest,
                "after": after_digest,
                "applied": applied,
                "replacements": found,
                "diff": kept,
            }),
        );
        let replaced = if found == 1 {
            "1 replacement".to_owned()
        } else {
            format!("{found} replacements")
        };
        let text = if applied {
            let first_line = before[..first_at].matches('\n').count();
            let new_lines = new.lines().count().max(1);
            let lines: Vec<&str> = after.lines().collect();
            let start = first_line.saturating_sub(SNIPPET_RADIUS);
            let end = lines.len().min(first_line + new_lines + SNIPPET_RADIUS);
            format!(
                "The file `{rel}` has been updated ({replaced}). Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                numbered(start + 1, lines[start.min(end)..end].iter().copied())
            )
        } else {
            format!("{}\n{replaced} in `{rel}`:\n{change}", not_written(&rel))
        };
        Ok(ToolOutput::text(text))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    file_path: String,
    content: String,
}

/// The `Write` tool.
pub(crate) struct Write {
    settings: Arc<Settings>,
    description: String,
}

impl Write {
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        let description = described(WRITE_DESCRIPTION, &settings.write_roots);
        Self {
            settings,
            description,
        }
    }
}

const WRITE: &str = "Write";

#[async_trait]
impl Tool for Write {
    fn name(&self) -> &str {
        WRITE
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to write, relative to the workspace root"},
                "content": {"type": "string", "description": "The whole content of the file"}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        write_flags()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: WriteInput = serde_json::from_value(input)
            .map_err(|err| fail(WRITE, format!("invalid input: {err}")))?;
        if input.content.len() > MAX_WRITE_BYTES {
            return Err(fail(
                WRITE,
                format!(
                    "the content is {} bytes, more than the {MAX_WRITE_BYTES} bytes (8 MiB) one Write may hold",
                    input.content.len()
                ),
            ));
        }
        let ws = Workspace::of(ctx, WRITE)?.with_roots(&self.settings.write_roots);
        let target = ws.resolve(WRITE, &input.file_path)?;
        let rel = target.rel.clone();
        check_allowed(&self.settings, WRITE, &target)?;
        let existing = match std::fs::metadata(&target.abs) {
            Ok(meta) if meta.is_dir() => {
                return Err(fail(WRITE, format!("`{rel}` is a directory, not a file")));
            }
            Ok(meta) if !meta.is_file() => {
                crate::paths::regular(WRITE, &rel, &meta)?;
                None
            }
            Ok(_) => {
                let bytes = std::fs::read(&target.abs)
                    .map_err(|err| fail(WRITE, format!("cannot read `{rel}`: {err}")))?;
                let digest = sha256_hex(&bytes);
                check_read(ctx, WRITE, &rel, &digest)?;
                Some((digest, bytes))
            }
            Err(_) => None,
        };
        let change = existing
            .as_ref()
            .map(|(_, bytes)| diff(&rel, &String::from_utf8_lossy(bytes), &input.content));
        let kept = match &change {
            Some(change) => kept_diff(ctx, change).await?,
            None => Value::Null,
        };
        let after_digest = sha256_hex(input.content.as_bytes());
        let applied = self.settings.write_mode == WriteMode::Apply;
        if applied {
            store(WRITE, &target, &input.content)?;
        }
        let created = existing.is_none();
        ctx.record(
            EXTENSION,
            "write",
            json!({
                "path": rel,
                "before": existing.as_ref().map(|(digest, _)| digest),
                "after": after_digest,
                "applied": applied,
                "created": created,
                "bytes": input.content.len(),
                "diff": kept,
            }),
        );
        let size = format!(
            "{} bytes, {} lines",
            input.content.len(),
            input.content.lines().count()
        );
        let text = match (applied, change) {
            (true, None) => format!("File created successfully at: {rel} ({size})"),
            (true, Some(_)) => format!("The file `{rel}` has been overwritten ({size})."),
            (false, None) => format!("{}\nit would create `{rel}` ({size}).", not_written(&rel)),
            (false, Some(change)) => format!(
                "{}\nit would overwrite `{rel}` ({size}) with this change:\n{change}",
                not_written(&rel)
            ),
        };
        Ok(ToolOutput::text(text))
    }
}
