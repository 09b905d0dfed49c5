//! The `instructions` extension: the project's instruction files as residents.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use noeta_core::ToolOutput;
use noeta_core::extension::{CommandReply, CommandSpec, ContextPart, Extension, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::records::ERASED_KIND;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The instruction files looked for in a directory, first non-empty wins.
pub const INSTRUCTION_FILES: [&str; 3] = ["NOETA.md", "AGENTS.md", "CLAUDE.md"];

/// The extension's name; its records are `instructions/loaded` and `instructions/removed`.
pub const EXTENSION: &str = "instructions";

/// The tool whose reads make subdirectory instructions apply.
const READ_TOOL: &str = "Read";

/// One loaded instruction file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Loaded {
    /// The directory, relative to the workspace root with `/` separators; `""` is the root.
    dir: String,
    /// The file's name in it.
    file: String,
    /// SHA-256 of the whole file.
    sha256: String,
    /// The text kept (cut to the byte cap, with a note).
    text: String,
}

/// What the records fold to.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The root's file, if any.
    root: Option<Loaded>,
    /// Subdirectory files, in the order they were first loaded.
    #[serde(default)]
    subdirs: Vec<Loaded>,
}

/// The folded state as `context` reads it on every compose: borrowed, the texts not copied.
#[derive(Debug, Default, Deserialize)]
struct Shown<'a> {
    #[serde(borrow)]
    root: Option<ShownFile<'a>>,
    #[serde(borrow, default)]
    subdirs: Vec<ShownFile<'a>>,
}

#[derive(Debug, Deserialize)]
struct ShownFile<'a> {
    dir: &'a str,
    file: &'a str,
    text: &'a str,
}

impl<'a> Shown<'a> {
    fn read(view: &'a View<'_>) -> Self {
        view.ext_state(EXTENSION)
            .and_then(|value| Self::deserialize(value).ok())
            .unwrap_or_default()
    }

    /// Whether the file of directory `dir` (`""`: the root) is loaded.
    fn has(&self, dir: &str) -> bool {
        if dir.is_empty() {
            self.root.is_some()
        } else {
            self.subdirs.iter().any(|l| l.dir == dir)
        }
    }
}

impl State {
    fn read(view: &View<'_>) -> Self {
        view.ext_state(EXTENSION)
            .and_then(|value| Self::deserialize(value).ok())
            .unwrap_or_default()
    }

    fn get(&self, dir: &str) -> Option<&Loaded> {
        if dir.is_empty() {
            self.root.as_ref()
        } else {
            self.subdirs.iter().find(|l| l.dir == dir)
        }
    }
}

/// Instruction files as residents: the root's on every claim, a subdirectory's once a `Read`
/// reaches into it.
pub struct Instructions {
    max_bytes: usize,
}

impl Instructions {
    /// Keeps at most `max_bytes` of each file.
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes }
    }

    /// The first non-empty instruction file of `dir` (inside `root`), read and cut.
    fn find(&self, root: &Path, rel: &str) -> Option<Loaded> {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        for name in INSTRUCTION_FILES {
            let path = dir.join(name);
            // Most of the names are not there: one `lstat` says so before anything is resolved.
            if path.symlink_metadata().is_err() {
                continue;
            }
            // A file that resolves outside the workspace (a symlink out) is not the project's.
            match path.canonicalize() {
                Ok(real) if real.starts_with(root) && real.is_file() => {}
                _ => continue,
            }
            let read = noeta_core::files::read_bounded(&path, MAX_FILE_BYTES).and_then(|bytes| {
                let sha256 = noeta_core::canonical::sha256_hex(&bytes);
                noeta_core::files::text(&path, bytes).map(|text| (sha256, text))
            });
            let loaded = match read {
                Ok((_, text)) if text.trim().is_empty() => continue,
                Ok((sha256, text)) => Loaded {
                    dir: rel.to_owned(),
                    file: name.to_owned(),
                    sha256,
                    text: cut(&text, self.max_bytes),
                },
                // A binary file, or one far too large, is no instructions: the next name is
                // tried, and the user told once.
                Err(
                    err @ (noeta_core::files::FileError::NotText { .. }
                    | noeta_core::files::FileError::TooLarge { .. }),
                ) => {
                    warn_once(&path, &err);
                    continue;
                }
                Err(err) => Loaded {
                    dir: rel.to_owned(),
                    file: name.to_owned(),
                    sha256: String::new(),
                    text: format!("({} could not be read: {err})", shown(rel, name)),
                },
            };
            return Some(loaded);
        }
        None
    }

    /// Records `dir`'s file when it differs from what the state holds (or its removal).
    fn refresh(&self, view: &View<'_>, state: &State, root: &Path, dir: &str) -> Option<Loaded> {
        let found = self.find(root, dir);
        match (found, state.get(dir)) {
            (Some(found), Some(held)) if found == *held => None,
            (Some(found), _) => {
                view.record(
                    EXTENSION,
                    "loaded",
                    serde_json::to_value(&found).unwrap_or(Value::Null),
                );
                Some(found)
            }
            (None, Some(_)) => {
                view.record(EXTENSION, "removed", json!({ "dir": dir }));
                None
            }
            (None, None) => None,
        }
    }
}

/// The most bytes of an instruction file that are read; a larger one is skipped.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Warns once per process about an instruction file that is skipped.
fn warn_once(path: &Path, err: &noeta_core::files::FileError) {
    static WARNED: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let first = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(path.to_path_buf());
    if first {
        tracing::warn!("instruction file skipped: {err}");
    }
}

/// `text` cut to at most `max` bytes on a character boundary, with a note saying so.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n\n[cut: the file has {} bytes, the first {end} are shown; read it for the rest]",
        &text[..end],
        text.len()
    )
}

/// A file as the model sees its path.
fn shown(dir: &str, file: &str) -> String {
    if dir.is_empty() {
        file.to_owned()
    } else {
        format!("{dir}/{file}")
    }
}

/// The workspace root, resolved (symlinks and all), when there is one.
fn real_root(view: &View<'_>) -> Option<PathBuf> {
    view.workspace()
        .and_then(|root| noeta_core::exec::real_root(root).ok())
}

/// Whether `path` names a file directly in `root` that is no symlink: it is then in the root's
/// own directory, whose instructions are loaded when the task starts.
fn directly_in(root: &Path, path: &str) -> bool {
    let given = Path::new(path);
    let mut parts = given.components();
    matches!(
        (parts.next(), parts.next()),
        (Some(Component::Normal(_)), None)
    ) && root
        .join(given)
        .symlink_metadata()
        .is_ok_and(|meta| !meta.file_type().is_symlink())
}

/// The directories from the root (exclusive) down to `dir` (inclusive), relative to the root.
fn dirs_down_to(root: &Path, dir: &Path) -> Vec<String> {
    let Ok(rel) = dir.strip_prefix(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = String::new();
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Vec::new();
        };
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(&name.to_string_lossy());
        out.push(at.clone());
    }
    out
}

#[async_trait]
impl Extension for Instructions {
    fn name(&self) -> &str {
        EXTENSION
    }

    fn commands(&self, _view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        Ok(vec![crate::init::spec()])
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        crate::init::run(view, name, args)
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        let Some(root) = real_root(view) else {
            return Ok(());
        };
        let state = State::read(view);
        self.refresh(view, &state, &root, "");
        let dirs: Vec<String> = state.subdirs.iter().map(|l| l.dir.clone()).collect();
        for dir in dirs {
            self.refresh(view, &state, &root, &dir);
        }
        Ok(())
    }

    async fn after_tool(
        &self,
        view: &View<'_>,
        call: &ToolCall,
        mut output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        if call.name != READ_TOOL || output.is_error {
            return Ok(output);
        }
        let (Some(given), Some(path)) = (
            view.workspace(),
            call.input.get("file_path").and_then(Value::as_str),
        ) else {
            return Ok(output);
        };
        // Most reads are of a file in the root's own directory: told by one `lstat` through
        // the root as given (its last part is the file's, the same through any link on the
        // way to the root), before the root is resolved.
        if directly_in(given, path) {
            return Ok(output);
        }
        let Some(root) = real_root(view) else {
            return Ok(output);
        };
        let Ok(file) = root.join(path).canonicalize() else {
            return Ok(output);
        };
        let Some(dir) = file.parent().filter(|d| d.starts_with(&root)) else {
            return Ok(output);
        };
        // Most reads land where everything is loaded: the texts are decoded only when not.
        let loaded = Shown::read(view);
        let mut seen = BTreeSet::new();
        let unloaded: Vec<String> = dirs_down_to(&root, dir)
            .into_iter()
            .filter(|rel| !loaded.has(rel) && seen.insert(rel.clone()))
            .collect();
        if unloaded.is_empty() {
            return Ok(output);
        }
        let state = State::read(view);
        let mut applied = Vec::new();
        for rel in unloaded {
            if let Some(loaded) = self.refresh(view, &state, &root, &rel) {
                applied.push(shown(&loaded.dir, &loaded.file));
            }
        }
        if !applied.is_empty() {
            output.text.push_str(&format!(
                "\n\n(Instructions now in your context apply to this directory: {})",
                applied.join(", ")
            ));
        }
        Ok(output)
    }

    fn context(&self, view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        let state = Shown::read(view);
        let mut parts = Vec::new();
        if let Some(root) = &state.root {
            parts.push(ContextPart::resident_of(
                crate::INSTRUCTIONS_KIND.0,
                format!(
                    "Project instructions from `{}` at the workspace root. Follow them:\n\n{}",
                    root.file, root.text
                ),
            ));
        }
        for sub in &state.subdirs {
            parts.push(ContextPart::resident_of(
                crate::INSTRUCTIONS_KIND.0,
                format!(
                    "Instructions from `{}`, for work in `{}/`. Follow them there:\n\n{}",
                    shown(sub.dir, sub.file),
                    sub.dir,
                    sub.text
                ),
            ));
        }
        Ok(parts)
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let mut folded: State = if state.is_null() {
            State::default()
        } else {
            State::deserialize(&*state).map_err(|err| format!("bad folded state: {err}"))?
        };
        match kind {
            "loaded" => {
                let loaded = Loaded::deserialize(data)
                    .map_err(|err| format!("bad `loaded` record: {err}"))?;
                if loaded.dir.is_empty() {
                    folded.root = Some(loaded);
                } else if let Some(held) = folded.subdirs.iter_mut().find(|l| l.dir == loaded.dir) {
                    *held = loaded;
                } else {
                    folded.subdirs.push(loaded);
                }
            }
            "removed" => {
                let dir = data
                    .get("dir")
                    .and_then(Value::as_str)
                    .ok_or("bad `removed` record: no `dir`")?;
                if dir.is_empty() {
                    folded.root = None;
                } else {
                    folded.subdirs.retain(|l| l.dir != dir);
                }
            }
            ERASED_KIND => return Ok(()),
            other => return Err(format!("unknown record kind `{other}`")),
        }
        *state = serde_json::to_value(&folded).map_err(|err| err.to_string())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_file_is_cut_on_a_character_boundary_with_a_note() {
        let text = "é".repeat(10);
        let kept = cut(&text, 5);
        assert!(kept.starts_with("éé\n\n[cut: the file has 20 bytes, the first 4 are shown"));
        assert_eq!(cut("short", 5), "short");
    }

    #[test]
    fn directories_from_the_root_down() {
        let root = Path::new("/w");
        assert_eq!(
            dirs_down_to(root, Path::new("/w/a/b")),
            vec!["a".to_owned(), "a/b".to_owned()]
        );
        assert!(dirs_down_to(root, Path::new("/w")).is_empty());
        assert!(dirs_down_to(root, Path::new("/elsewhere")).is_empty());
    }
}
