//! The memory directory: one `<name>.md` file per memory, archived ones under `archive/`.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::Regex;

use crate::frontmatter::Document;
use crate::matcher::similarity;

/// The most bytes of a memory file that are read (`memory_read`'s ceiling too).
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most bytes of a name.
pub(crate) const MAX_NAME_BYTES: usize = 240;
/// The subdirectory archived memories move to.
pub(crate) const ARCHIVE_DIR: &str = "archive";

/// A name: a letter or digit, then up to 127 word characters, dots or dashes.
static NAME: LazyLock<Regex> = LazyLock::new(name_pattern);

#[expect(
    clippy::expect_used,
    reason = "the pattern is a constant, and the unit test compiles it"
)]
fn name_pattern() -> Regex {
    Regex::new(r"^[^\W_][\w.-]{0,127}$").expect("the name pattern compiles")
}

/// Checks a memory name; the error starts with `tool` and names the value.
pub(crate) fn check_name(tool: &str, name: &str) -> Result<(), String> {
    if name.contains(['/', '\\']) {
        return Err(format!(
            "{tool}: name `{name}` contains a path separator; a name is one file name, without `/` or `\\`"
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{tool}: name is {} bytes long, over the {MAX_NAME_BYTES}-byte limit",
            name.len()
        ));
    }
    if !NAME.is_match(name) {
        return Err(format!(
            "{tool}: name `{name}` is not a valid memory name: start with a letter or digit, then use up to 127 letters, digits, `_`, `.` or `-`"
        ));
    }
    Ok(())
}

/// One memory of the directory.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    /// Its name (the file name without `.md`).
    pub(crate) name: String,
    /// Its parsed text; `None` when it could not be read or parsed (too large, not UTF-8,
    /// broken frontmatter): it is still listed, by name.
    pub(crate) doc: Option<Document>,
}

/// Distinguishes the temporary files of concurrent writes within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The memory directory.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where memory `name` lives.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.md"))
    }

    /// Every memory (archived ones aside), sorted by name; none when the directory does not
    /// exist yet.
    pub(crate) fn list(&self) -> io::Result<Vec<Memory>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry?;
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".md")) else {
                continue;
            };
            if check_name("", name).is_err() || !entry.file_type()?.is_file() {
                continue;
            }
            names.push(name.to_owned());
        }
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| {
                let doc = self.load(&name).ok().flatten();
                Memory { name, doc }
            })
            .collect())
    }

    /// The names of every memory, sorted.
    pub(crate) fn names(&self) -> io::Result<Vec<String>> {
        Ok(self.list()?.into_iter().map(|m| m.name).collect())
    }

    /// Memory `name`'s text, `None` when there is no such memory; an error for a file over
    /// [`MAX_FILE_BYTES`] or not UTF-8.
    pub(crate) fn read_text(&self, name: &str) -> Result<Option<String>, String> {
        let path = self.path(name);
        let size = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta.len(),
            Ok(_) => return Ok(None),
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("memory `{name}` could not be read: {err}")),
        };
        if size > MAX_FILE_BYTES {
            return Err(format!(
                "memory `{name}` is {size} bytes, over the {MAX_FILE_BYTES}-byte (1 MiB) limit"
            ));
        }
        let bytes = std::fs::read(&path)
            .map_err(|err| format!("memory `{name}` could not be read: {err}"))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("memory `{name}` is not UTF-8 text"))?;
        Ok(Some(match text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_owned(),
            None => text,
        }))
    }

    /// Memory `name`, parsed; `None` when there is no such memory.
    pub(crate) fn load(&self, name: &str) -> Result<Option<Document>, String> {
        match self.read_text(name)? {
            Some(text) => Document::parse(&text)
                .map(Some)
                .map_err(|err| format!("memory `{name}`: {err}")),
            None => Ok(None),
        }
    }

    /// Writes memory `name` whole: to a temporary file beside it, then renamed over it.
    pub(crate) fn write(&self, name: &str, text: &str) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = self
            .dir
            .join(format!(".write-{}-{n}.tmp", std::process::id()));
        let written = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, self.path(name))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    /// Moves memory `name` into `archive/` (made on demand); an archived memory of the same
    /// name is kept, the new one taking `<name>~2.md`, `<name>~3.md`, …. Returns where it went.
    pub(crate) fn archive(&self, name: &str) -> io::Result<PathBuf> {
        let archive = self.dir.join(ARCHIVE_DIR);
        std::fs::create_dir_all(&archive)?;
        let mut target = archive.join(format!("{name}.md"));
        let mut n = 1;
        while target.exists() {
            n += 1;
            target = archive.join(format!("{name}~{n}.md"));
        }
        std::fs::rename(self.path(name), &target)?;
        Ok(target)
    }
}

/// Up to `max` names like `name` (by edit similarity, or containing it or contained in it),
/// closest first, ties by name.
pub(crate) fn close_names(names: &[String], name: &str, max: usize) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(f64, &String)> = names
        .iter()
        .filter_map(|candidate| {
            let c = candidate.to_lowercase();
            let mut score = similarity(candidate, name);
            if c.contains(&lower) || lower.contains(&c) {
                score = score.max(0.75);
            }
            (score >= 0.5).then_some((score, candidate))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(max)
        .map(|(_, n)| n.clone())
        .collect()
}
