//! `Read`: a text file in `cat -n` form, recording its digest in the read registry.

use std::io::Read as _;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::canonical::sha256_hex;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::notebook;
use crate::paths::{Workspace, described, fail, numbered, reading_flags};
use crate::registry::EXTENSION;
use crate::settings::Settings;

const NAME: &str = "Read";
/// Lines read when no `limit` is given.
pub(crate) const DEFAULT_LINES: usize = 2000;
/// Longer lines are clipped.
pub(crate) const MAX_LINE_CHARS: usize = 2000;
/// Without a `limit`, larger files are refused.
pub(crate) const MAX_WHOLE_FILE_BYTES: u64 = 262_144;
/// The most tokens one read returns (estimated at 4 characters per token).
pub(crate) const MAX_TOKENS: usize = 25_000;
/// The largest image Read shows.
pub(crate) const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The image kind of a file's first bytes (by their magic numbers), if it is one.
pub(crate) fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

const DESCRIPTION: &str = "\
Read a text file from the workspace. `file_path` is relative to the workspace root (or absolute \
inside it). The result is in `cat -n` form: each line starts with its line number and a tab. \
By default up to 2000 lines are read from the start; use `offset` (the first line, from 1) and \
`limit` (how many lines) for long files — a file larger than 256 KiB must be read with a \
`limit`. Lines longer than 2000 characters are clipped. A Jupyter notebook (`.ipynb`) is shown \
cell by cell (`--- cell N (code) ---` and its source, then `--- output ---` and its text \
outputs); offset and limit count those lines. An image (PNG, JPEG, GIF or WebP, at most 5 MiB) \
is shown to you as the image itself. A PDF is read as the text of its pages: give `pages` \
(such as \"1-5\" or \"3,7-9\", at most 20 pages a read) for a PDF of more than 10 pages. Other \
binary files are not supported. Read a file before you Edit it or overwrite it with Write.";

/// The most PDF pages one read takes, and the most a PDF may have to be read without `pages`.
pub(crate) const MAX_PDF_PAGES: usize = 20;
const MAX_WHOLE_PDF_PAGES: usize = 10;
/// The largest PDF Read opens.
pub(crate) const MAX_PDF_BYTES: u64 = 32 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    file_path: String,
    offset: Option<usize>,
    limit: Option<usize>,
    pages: Option<String>,
}

/// The `Read` tool.
pub(crate) struct Read {
    settings: Arc<Settings>,
    description: String,
}

impl Read {
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        let description = described(DESCRIPTION, &settings.write_roots);
        Self {
            settings,
            description,
        }
    }
}

#[async_trait]
impl Tool for Read {
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
                "file_path": {"type": "string", "description": "The file to read, relative to the workspace root"},
                "offset": {"type": "integer", "minimum": 1, "description": "The line to start from (1 is the first line)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read"},
                "pages": {"type": "string", "description": "For a PDF: the pages to read, such as \"1-5\" or \"3,7-9\" (at most 20)"}
            },
            "required": ["file_path"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        // Read bounds its own output by the token limit (and a short note), so the runtime's
        // clipping never cuts a page it returns.
        reading_flags(MAX_TOKENS * 4 + 1_000)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: Input = serde_json::from_value(input)
            .map_err(|err| fail(NAME, format!("invalid input: {err}")))?;
        let offset = input.offset.unwrap_or(1);
        if offset == 0 || input.limit == Some(0) {
            return Err(fail(NAME, "offset and limit start at 1"));
        }
        let ws = Workspace::of(ctx, NAME)?.with_roots(&self.settings.write_roots);
        let target = ws.resolve(NAME, &input.file_path)?;
        let rel = &target.rel;
        let meta = match target.meta.clone() {
            Some(meta) => meta,
            None => std::fs::metadata(&target.abs)
                .map_err(|_| fail(NAME, format!("file `{rel}` does not exist")))?,
        };
        if meta.is_dir() {
            return Err(fail(
                NAME,
                format!("`{rel}` is a directory, not a file; use Glob to list its files"),
            ));
        }
        crate::paths::regular(NAME, rel, &meta)?;
        // The file is opened once: its first bytes say what it is, the rest is read on from
        // there when it is shown whole.
        let cannot = |err: std::io::Error| fail(NAME, format!("cannot read `{rel}`: {err}"));
        // A file that may be shown whole is read in one go (its size is known), a larger one
        // from its head on.
        let small = meta.len() <= MAX_WHOLE_FILE_BYTES;
        let first = if small { meta.len() } else { 16 };
        let mut file = std::fs::File::open(&target.abs).map_err(cannot)?;
        let mut bytes = Vec::with_capacity(usize::try_from(first).unwrap_or(16));
        (&mut file)
            .take(first)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
        let mut whole = |mut bytes: Vec<u8>| {
            if small {
                return Ok(bytes);
            }
            bytes.reserve(usize::try_from(meta.len()).unwrap_or(0));
            (&mut file)
                .take(u64::MAX)
                .read_to_end(&mut bytes)
                .map(|_| bytes)
                .map_err(cannot)
        };
        if let Some(media_type) = image_type(&bytes) {
            if meta.len() > MAX_IMAGE_BYTES {
                return Err(fail(
                    NAME,
                    format!(
                        "the image `{rel}` is {} bytes, more than the {MAX_IMAGE_BYTES} bytes (5 MiB) shown",
                        meta.len()
                    ),
                ));
            }
            let bytes = whole(bytes)?;
            ctx.record(
                EXTENSION,
                "read",
                json!({ "path": target.rel, "digest": sha256_hex(&bytes) }),
            );
            let shown = format!("Image file `{rel}` ({media_type}, {} bytes).", bytes.len());
            return Ok(ToolOutput::text(shown).with_attachment(media_type, bytes));
        }
        if bytes.starts_with(b"%PDF-") {
            if input.offset.is_some() || input.limit.is_some() {
                return Err(fail(
                    NAME,
                    format!(
                        "`{rel}` is a PDF: choose what to read with `pages`, not offset and limit"
                    ),
                ));
            }
            if meta.len() > MAX_PDF_BYTES {
                return Err(fail(
                    NAME,
                    format!(
                        "the PDF `{rel}` is {} bytes, more than the {MAX_PDF_BYTES} bytes (32 MiB) read",
                        meta.len()
                    ),
                ));
            }
            let bytes = whole(bytes)?;
            let shown = pdf_text(rel, &bytes, input.pages.as_deref())?;
            ctx.record(
                EXTENSION,
                "read",
                json!({ "path": target.rel, "digest": sha256_hex(&bytes) }),
            );
            return Ok(ToolOutput::text(shown));
        }
        if input.pages.is_some() {
            return Err(fail(
                NAME,
                format!("`pages` is for PDF files, and `{rel}` is not one; use offset and limit"),
            ));
        }
        let is_notebook = notebook::is_notebook(&target.abs);
        // A notebook's outputs (images above all) make its file far larger than what is shown,
        // so its rendered text is measured instead, once rendered.
        if input.limit.is_none() && !is_notebook && meta.len() > MAX_WHOLE_FILE_BYTES {
            return Err(fail(
                NAME,
                format!(
                    "`{rel}` is {} bytes, more than the {MAX_WHOLE_FILE_BYTES} bytes (256 KiB) read at once; use offset and limit to read part of it",
                    meta.len()
                ),
            ));
        }
        if let Some(limit) = input.limit
            && !is_notebook
            && meta.len() > MAX_WHOLE_FILE_BYTES
        {
            // A part of a large file: streamed, so memory stays bounded whatever its size, on a
            // helper thread that stops when the call is cancelled.
            let path = target.abs.clone();
            let range = crate::paths::off_thread(NAME, move |cancelled| {
                crate::ranged::read_range(&path, offset, limit, cancelled)
            })
            .await?
            .map_err(|err| match err {
                crate::ranged::RangeError::Io(err) => {
                    fail(NAME, format!("cannot read `{rel}`: {err}"))
                }
                crate::ranged::RangeError::NotText => not_text(NAME, rel),
            })?;
            let shown = shown_lines(rel, offset, Some(limit), &range.lines, range.total)?;
            ctx.record(
                EXTENSION,
                "read",
                json!({ "path": target.rel, "digest": range.digest }),
            );
            return Ok(ToolOutput::text(shown));
        }
        let bytes = whole(bytes)?;
        let text = text_of(&bytes).ok_or_else(|| not_text(NAME, rel))?;
        let digest = sha256_hex(&bytes);
        let mut rendered = None;
        let mut note = None;
        if is_notebook && !text.is_empty() {
            match notebook::render(text) {
                Ok(cells) => rendered = Some(cells),
                Err(why) => {
                    note = Some(format!(
                        "(`{rel}` is shown as raw text: it is not an nbformat 4 notebook, since {why})"
                    ));
                }
            }
        }
        let text = rendered.as_deref().unwrap_or(text);
        if is_notebook && input.limit.is_none() && text.len() as u64 > MAX_WHOLE_FILE_BYTES {
            return Err(fail(
                NAME,
                format!(
                    "the notebook `{rel}` comes to {} bytes as shown, more than the {MAX_WHOLE_FILE_BYTES} bytes (256 KiB) read at once; use offset and limit to read part of it",
                    text.len()
                ),
            ));
        }
        let lines: Vec<&str> = text.lines().collect();
        let shown = if lines.is_empty() && rendered.is_some() {
            format!("(the notebook `{rel}` has no cells)")
        } else {
            let end = lines
                .len()
                .min(offset.saturating_add(input.limit.unwrap_or(DEFAULT_LINES)) - 1);
            let window: Vec<std::borrow::Cow<'_, str>> = lines
                .get(offset - 1..end)
                .unwrap_or_default()
                .iter()
                .map(|line| clip(line))
                .collect();
            shown_lines(rel, offset, input.limit, &window, lines.len())?
        };
        let shown = match note {
            Some(note) => format!("{shown}\n\n{note}"),
            None => shown,
        };
        ctx.record(
            EXTENSION,
            "read",
            json!({ "path": target.rel, "digest": digest }),
        );
        Ok(ToolOutput::text(shown))
    }
}

/// The pages `spec` names (`"3"`, `"1-5"`, `"1,3,7-9"`) of a PDF of `total` pages, in order,
/// each once.
pub(crate) fn page_numbers(spec: &str, total: u32) -> Result<Vec<u32>, String> {
    let mut pages = std::collections::BTreeSet::new();
    for part in spec.split(',').map(str::trim) {
        let bad =
            || format!("`pages` `{spec}`: `{part}` is not a page or a range such as 3 or 1-5");
        let (from, to) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (part.parse::<u32>(), part.parse::<u32>()),
        };
        let (Ok(from), Ok(to)) = (from, to) else {
            return Err(bad());
        };
        if from == 0 || to < from {
            return Err(bad());
        }
        if to > total {
            return Err(format!(
                "`pages` `{spec}`: page {to} is past the end (the PDF has {total} pages)"
            ));
        }
        pages.extend(from..=to);
        if pages.len() > MAX_PDF_PAGES {
            return Err(format!(
                "`pages` `{spec}` names more than {MAX_PDF_PAGES} pages; read at most {MAX_PDF_PAGES} at a time"
            ));
        }
    }
    Ok(pages.into_iter().collect())
}

/// The text of a PDF's pages, page by page.
fn pdf_text(rel: &str, bytes: &[u8], spec: Option<&str>) -> Result<String, ToolError> {
    let doc = lopdf::Document::load_mem(bytes)
        .map_err(|err| fail(NAME, format!("cannot read the PDF `{rel}`: {err}")))?;
    let total = u32::try_from(doc.get_pages().len()).unwrap_or(u32::MAX);
    if total == 0 {
        return Ok(format!("(the PDF `{rel}` has no pages)"));
    }
    let pages = match spec {
        Some(spec) => page_numbers(spec, total).map_err(|why| fail(NAME, why))?,
        None if total as usize > MAX_WHOLE_PDF_PAGES => {
            return Err(fail(
                NAME,
                format!(
                    "the PDF `{rel}` has {total} pages, more than the {MAX_WHOLE_PDF_PAGES} read without `pages`; give `pages`, such as \"1-{MAX_PDF_PAGES}\""
                ),
            ));
        }
        None => (1..=total).collect(),
    };
    let mut out = Vec::new();
    for page in pages {
        let text = doc.extract_text(&[page]).unwrap_or_default();
        let text = text.trim();
        out.push(if text.is_empty() {
            format!("--- page {page} of {total} ---\n(no text on this page: it may be an image)")
        } else {
            format!("--- page {page} of {total} ---\n{text}")
        });
    }
    let shown = out.join("\n\n");
    let tokens = shown.len().div_ceil(4);
    if tokens > MAX_TOKENS {
        return Err(fail(
            NAME,
            format!(
                "those pages of `{rel}` come to about {tokens} tokens, more than the {MAX_TOKENS} read at once; read fewer pages"
            ),
        ));
    }
    Ok(shown)
}

/// The bytes as text, unless they hold a NUL byte or are not UTF-8.
pub(crate) fn text_of(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// The error for a file that is not text.
pub(crate) fn not_text(tool: &str, rel: &str) -> ToolError {
    fail(
        tool,
        format!(
            "`{rel}` is not utf-8 text (binary files other than images, and PDFs, are not supported)"
        ),
    )
}

/// What Read shows of a text file: `window` (the clipped lines from `offset` on, as many as
/// asked for or the default) numbered, or a note for an empty file or an offset past its end;
/// refused past [`MAX_TOKENS`]. `total` is how many lines the file has.
fn shown_lines(
    rel: &str,
    offset: usize,
    limit: Option<usize>,
    window: &[impl AsRef<str>],
    total: usize,
) -> Result<String, ToolError> {
    if total == 0 {
        return Ok(format!("(the file `{rel}` is empty)"));
    }
    if offset > total {
        return Ok(format!(
            "(offset {offset} is past the end of `{rel}`, which has {total} lines)"
        ));
    }
    let end = offset + window.len() - 1;
    let mut out = numbered(offset, window.iter().map(AsRef::as_ref));
    let tokens = out.len().div_ceil(4);
    if tokens > MAX_TOKENS {
        return Err(fail(
            NAME,
            format!(
                "lines {offset}–{end} of `{rel}` come to about {tokens} tokens, more than the {MAX_TOKENS} read at once; read fewer lines with offset and limit"
            ),
        ));
    }
    if limit.is_none() && end < total {
        out.push_str(&format!(
            "\n\n(showing lines {offset}–{end} of {total}; use offset and limit to read more)"
        ));
    }
    Ok(out)
}

/// A line clipped to [`MAX_LINE_CHARS`] (borrowed when short enough to show whole).
fn clip(line: &str) -> std::borrow::Cow<'_, str> {
    // A line of at most MAX_LINE_CHARS bytes has at most as many characters.
    if line.len() <= MAX_LINE_CHARS {
        return std::borrow::Cow::Borrowed(line);
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{} … [line truncated]", &line[..at]).into(),
        None => line.into(),
    }
}
