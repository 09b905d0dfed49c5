//! `Grep`: a regex search over the workspace with ripgrep's engine, in-process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::glob::walker;
use crate::paths::{Cancelled, Workspace, described, fail, off_thread, reading_flags};
use crate::settings::Settings;

const NAME: &str = "Grep";
/// Output entries returned when `head_limit` is not given.
pub(crate) const DEFAULT_HEAD_LIMIT: usize = 250;
/// The search stops once its output reaches this many bytes.
pub(crate) const MAX_CAPTURE_BYTES: usize = 16 * 1024 * 1024;
/// The search stops after this long.
const TIMEOUT: Duration = Duration::from_secs(60);

const DESCRIPTION: &str = "\
Search file contents with a regular expression (ripgrep syntax), across the workspace or under \
`path` (a directory or one file). Files ignored by .gitignore and hidden files are skipped \
unless `-u` is set; binary files are skipped. Filter files with `glob` (such as `*.rs` or \
`*.{ts,tsx}`) or `type` (such as `rust`, `py`, `js`). `output_mode` is `files_with_matches` \
(the default: the paths of matching files), `content` (matching lines, with `-n` line numbers \
on by default and `-A`/`-B`/`-C` context lines; `-o` prints only the matched parts, each on \
its own line, and ignores context) or `count` (matches per file). `-i` ignores case; \
`multiline` lets `.` match newlines and patterns span lines. Results are sorted by path; \
`head_limit` (default 250, 0 for all) and `offset` page through them.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    FilesWithMatches,
    Content,
    Count,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(rename = "type")]
    file_type: Option<String>,
    output_mode: Option<Mode>,
    #[serde(rename = "-i")]
    ignore_case: Option<bool>,
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    #[serde(rename = "-o")]
    only_matching: Option<bool>,
    #[serde(rename = "-u")]
    unrestricted: Option<bool>,
    #[serde(rename = "-A")]
    after: Option<usize>,
    #[serde(rename = "-B")]
    before: Option<usize>,
    #[serde(rename = "-C")]
    around: Option<usize>,
    context: Option<usize>,
    head_limit: Option<usize>,
    offset: Option<usize>,
    multiline: Option<bool>,
}

/// The `Grep` tool.
pub(crate) struct Grep {
    settings: Arc<Settings>,
    description: String,
}

impl Grep {
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        let description = described(DESCRIPTION, &settings.write_roots);
        Self {
            settings,
            description,
        }
    }
}

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        let count = |what: &str| json!({"type": "integer", "minimum": 0, "description": what});
        let flag = |what: &str| json!({"type": "boolean", "description": what});
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression to search for"},
                "path": {"type": "string", "description": "The file or directory to search (default: the workspace root)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, such as `*.rs` or `src/**/*.{ts,tsx}`"},
                "type": {"type": "string", "description": "Only search files of this type, such as `rust`, `py`, `js`, `md`"},
                "output_mode": {
                    "type": "string",
                    "enum": ["files_with_matches", "content", "count"],
                    "description": "files_with_matches (default): matching paths; content: matching lines; count: matches per file"
                },
                "-i": flag("Ignore case"),
                "-n": flag("Show line numbers (content mode; default true)"),
                "-o": flag("Show only the matched parts of matching lines, each on its own line (content mode; context flags are ignored)"),
                "-u": flag("Also search ignored and hidden files"),
                "-A": count("Lines of context after each match (content mode)"),
                "-B": count("Lines of context before each match (content mode)"),
                "-C": count("Lines of context around each match (content mode)"),
                "context": count("Lines of context around each match (content mode; same as -C)"),
                "head_limit": count("Return at most this many entries (default 250; 0 for all)"),
                "offset": count("Skip this many entries first"),
                "multiline": flag("Let `.` match newlines and patterns span lines")
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        reading_flags(20_000)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: Input = serde_json::from_value(input)
            .map_err(|err| fail(NAME, format!("invalid input: {err}")))?;
        let multiline = input.multiline.unwrap_or(false);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(input.ignore_case.unwrap_or(false))
            .multi_line(true)
            .dot_matches_new_line(multiline)
            .line_terminator(if multiline { None } else { Some(b'\n') })
            .build(&input.pattern)
            .map_err(|err| {
                fail(
                    NAME,
                    format!("invalid regular expression `{}`: {err}", input.pattern),
                )
            })?;
        let ws = Workspace::of(ctx, NAME)?.with_roots(&self.settings.write_roots);
        let base = ws.resolve(NAME, input.path.as_deref().unwrap_or("."))?;
        let meta = std::fs::metadata(&base.abs)
            .map_err(|_| fail(NAME, format!("`{}` does not exist", base.rel)))?;
        crate::paths::regular(NAME, &base.rel, &meta)?;
        let unrestricted = input.unrestricted.unwrap_or(false);
        let files = if meta.is_dir() {
            let mut walk = walker(&base.abs, unrestricted);
            walk.filter_entry(|entry| entry.file_name() != ".git");
            if let Some(glob) = &input.glob {
                let mut overrides = OverrideBuilder::new(&base.abs);
                overrides
                    .add(glob)
                    .map_err(|err| fail(NAME, format!("invalid glob `{glob}`: {err}")))?;
                walk.overrides(
                    overrides
                        .build()
                        .map_err(|err| fail(NAME, format!("invalid glob `{glob}`: {err}")))?,
                );
            }
            if let Some(kind) = &input.file_type {
                let mut types = TypesBuilder::new();
                types.add_defaults().select(kind);
                walk.types(
                    types
                        .build()
                        .map_err(|_| fail(NAME, format!("unknown file type `{kind}`")))?,
                );
            }
            Some(walk)
        } else {
            None
        };
        let mode = input.output_mode.unwrap_or(Mode::FilesWithMatches);
        let only_matching = mode == Mode::Content && input.only_matching.unwrap_or(false);
        let context = input.context.or(input.around).unwrap_or(0);
        let (before, after) = if mode == Mode::Content && !only_matching {
            (
                input.before.unwrap_or(context),
                input.after.unwrap_or(context),
            )
        } else {
            (0, 0)
        };
        let search = Search {
            matcher,
            mode,
            line_numbers: input.line_numbers.unwrap_or(true),
            only_matching,
            before,
            after,
            multiline,
            timeout: TIMEOUT,
            capture_cap: MAX_CAPTURE_BYTES,
            progress: ctx.progress_sink(),
        };
        let single = base.abs.clone();
        let outcome = off_thread(NAME, move |cancelled| {
            let mut paths: Vec<(String, PathBuf)> = match files {
                Some(walk) => walk
                    .build()
                    .flatten()
                    .take_while(|_| !cancelled.is_set())
                    .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                    .map(|e| (ws.relative(e.path()), e.into_path()))
                    .collect(),
                None => vec![(ws.relative(&single), single)],
            };
            paths.sort();
            search.run(&paths, cancelled)
        })
        .await?;
        Ok(ToolOutput::text(outcome.render(
            mode,
            input.offset.unwrap_or(0),
            input.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT),
        )))
    }
}

/// One search's settings.
struct Search {
    matcher: RegexMatcher,
    mode: Mode,
    line_numbers: bool,
    /// Content mode prints the matched parts rather than the lines.
    only_matching: bool,
    before: usize,
    after: usize,
    multiline: bool,
    /// When the search stops, however far it got.
    timeout: Duration,
    /// Bytes of output after which the search stops.
    capture_cap: usize,
    /// Told how far the search got, a few times a second (live progress).
    progress: Option<noeta_core::exec::LineFn>,
}

/// How often a long search reports how far it got.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// `bytes` for people: whole MiB when it is a whole number of them.
fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a search found: output entries (lines, paths or counts), and why it stopped early.
#[derive(Default)]
struct Outcome {
    entries: Vec<String>,
    matches: u64,
    files: usize,
    stopped: Option<String>,
}

impl Search {
    fn run(&self, paths: &[(String, PathBuf)], cancelled: &Cancelled) -> Outcome {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .multi_line(self.multiline)
            .before_context(self.before)
            .after_context(self.after)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let started = Instant::now();
        let mut outcome = Outcome::default();
        let mut captured = 0usize;
        let mut reported = started;
        for (searched, (rel, path)) in paths.iter().enumerate() {
            if cancelled.is_set() {
                break;
            }
            if let Some(progress) = &self.progress
                && reported.elapsed() >= PROGRESS_EVERY
            {
                reported = Instant::now();
                progress(&format!(
                    "{searched} of {} files searched, {} matches",
                    paths.len(),
                    outcome.matches
                ));
            }
            if started.elapsed() >= self.timeout {
                outcome.stopped = Some(format!(
                    "the search stopped after {} seconds; narrow it with path, glob or type",
                    self.timeout.as_secs()
                ));
                break;
            }
            let mut sink = Collect {
                rel,
                search: self,
                lines: Vec::new(),
                matches: 0,
                binary: false,
            };
            // Read through a reader that stops when the call is cancelled, mid-file too.
            if std::fs::File::open(path)
                .and_then(|file| {
                    searcher.search_reader(&self.matcher, cancelled.reader(file), &mut sink)
                })
                .is_err()
                || sink.binary
                || sink.matches == 0
            {
                continue;
            }
            outcome.files += 1;
            outcome.matches += sink.matches;
            let new: Vec<String> = match self.mode {
                Mode::FilesWithMatches => vec![rel.clone()],
                Mode::Count => vec![format!("{rel}:{}", sink.matches)],
                Mode::Content => {
                    let mut lines = sink.lines;
                    if (self.before > 0 || self.after > 0) && !outcome.entries.is_empty() {
                        lines.insert(0, "--".to_owned());
                    }
                    lines
                }
            };
            captured += new.iter().map(|l| l.len() + 1).sum::<usize>();
            outcome.entries.extend(new);
            if captured > self.capture_cap {
                outcome.stopped = Some(format!(
                    "the search stopped at {} of output; narrow it with path, glob or type",
                    size(self.capture_cap)
                ));
                break;
            }
        }
        outcome
    }
}

impl Outcome {
    fn render(self, mode: Mode, offset: usize, head_limit: usize) -> String {
        if self.entries.is_empty() {
            let none = match mode {
                Mode::FilesWithMatches => "No files found",
                Mode::Content | Mode::Count => "No matches found",
            };
            return match self.stopped {
                Some(why) => format!("{none} ({why})"),
                None => none.to_owned(),
            };
        }
        let total = self.entries.len();
        let limit = if head_limit == 0 {
            usize::MAX
        } else {
            head_limit
        };
        let page: Vec<String> = self.entries.into_iter().skip(offset).take(limit).collect();
        let shown = page.len();
        let mut out = Vec::new();
        match mode {
            Mode::FilesWithMatches => out.push(format!(
                "Found {} file{}",
                self.files,
                if self.files == 1 { "" } else { "s" }
            )),
            Mode::Content => {}
            Mode::Count => out.push(format!(
                "Found {} match{} in {} file{}",
                self.matches,
                if self.matches == 1 { "" } else { "es" },
                self.files,
                if self.files == 1 { "" } else { "s" }
            )),
        }
        out.extend(page);
        if shown == 0 {
            out.push(format!(
                "(offset {offset} is past the end: there are {total} entries)"
            ));
        } else if offset + shown < total {
            out.push(format!(
                "(showing entries {}–{} of {total}; use offset {} for more)",
                offset + 1,
                offset + shown,
                offset + shown
            ));
        }
        if let Some(why) = self.stopped {
            out.push(format!("({why})"));
        }
        out.join("\n")
    }
}

/// Gathers one file's matches.
struct Collect<'a> {
    rel: &'a str,
    search: &'a Search,
    lines: Vec<String>,
    matches: u64,
    binary: bool,
}

impl Collect<'_> {
    fn line(&mut self, number: Option<u64>, separator: char, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let line = match number {
            Some(n) if self.search.line_numbers => {
                format!("{}{separator}{n}{separator}{text}", self.rel)
            }
            _ => format!("{}{separator}{text}", self.rel),
        };
        self.lines.push(line);
    }

    /// The matched parts of `bytes` (the matching lines, the first numbered `first`), each on
    /// its own line; a part spanning lines (multiline) gives one entry per line, and empty
    /// parts none.
    fn parts(&mut self, first: Option<u64>, bytes: &[u8]) -> Result<bool, std::io::Error> {
        let mut found = Vec::new();
        self.search
            .matcher
            .find_iter(bytes, |m| {
                found.push(m);
                true
            })
            .map_err(std::io::Error::other)?;
        for m in found {
            let line = first
                .map(|n| n + bytes[..m.start()].iter().filter(|b| **b == b'\n').count() as u64);
            let part = &bytes[m];
            let part = part.strip_suffix(b"\n").unwrap_or(part);
            if part.is_empty() {
                continue;
            }
            for (i, piece) in part.split(|b| *b == b'\n').enumerate() {
                self.line(line.map(|n| n + i as u64), ':', piece);
            }
        }
        Ok(true)
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        match self.search.mode {
            Mode::FilesWithMatches => return Ok(false),
            Mode::Count => return Ok(true),
            Mode::Content => {}
        }
        let first = mat.line_number();
        if self.search.only_matching {
            return self.parts(first, mat.bytes());
        }
        for (i, line) in mat.lines().enumerate() {
            self.line(first.map(|n| n + i as u64), ':', line);
        }
        Ok(true)
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        self.line(context.line_number(), '-', context.bytes());
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        self.lines.push("--".to_owned());
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(timeout: Duration, capture_cap: usize) -> Search {
        Search {
            matcher: RegexMatcherBuilder::new()
                .build("needle")
                .unwrap_or_else(|e| panic!("{e}")),
            mode: Mode::Content,
            line_numbers: true,
            only_matching: false,
            before: 0,
            after: 0,
            multiline: false,
            timeout,
            capture_cap,
            progress: None,
        }
    }

    fn files() -> (tempfile::TempDir, Vec<(String, PathBuf)>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut paths = Vec::new();
        for name in ["a.txt", "b.txt"] {
            let path = dir.path().join(name);
            std::fs::write(&path, "needle one\nneedle two\n").unwrap_or_else(|e| panic!("{e}"));
            paths.push((name.to_owned(), path));
        }
        (dir, paths)
    }

    #[test]
    fn the_search_stops_at_its_deadline_and_at_its_output_cap() {
        let (_dir, paths) = files();
        let all = search(TIMEOUT, MAX_CAPTURE_BYTES).run(&paths, &Cancelled::default());
        assert_eq!((all.files, all.matches, all.stopped), (2, 4, None));

        let late = search(Duration::ZERO, MAX_CAPTURE_BYTES).run(&paths, &Cancelled::default());
        assert_eq!(late.files, 0);
        assert_eq!(
            late.stopped.as_deref(),
            Some("the search stopped after 0 seconds; narrow it with path, glob or type")
        );

        let full = search(TIMEOUT, 10).run(&paths, &Cancelled::default());
        assert_eq!(full.files, 1, "the first file's lines pass the cap");
        assert_eq!(
            full.stopped.as_deref(),
            Some("the search stopped at 10 bytes of output; narrow it with path, glob or type")
        );
        assert_eq!(size(MAX_CAPTURE_BYTES), "16 MiB");
    }
}
