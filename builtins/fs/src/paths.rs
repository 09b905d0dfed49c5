//! The workspace fence: resolving a tool's path argument inside the workspace root, or
//! inside one of the `write_roots` the file tools may also use.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use noeta_core::{ToolContext, ToolError, ToolFlags};

/// The flags of the reading tools (Read, Glob, Grep): read-only and safe while planning,
/// clearable, safe to rerun, their results clipped past `max_chars`.
pub(crate) fn reading_flags(max_chars: usize) -> ToolFlags {
    ToolFlags::read_only()
        .clearable()
        .retry_safe()
        .with_max_result_chars(max_chars)
}

/// A model-visible failure of `tool`: `<Tool>: <message>`.
pub(crate) fn fail(tool: &str, message: impl std::fmt::Display) -> ToolError {
    ToolError::RespondToModel(format!("{tool}: {message}"))
}

/// Refuses what is neither a directory nor a regular file — a named pipe, a socket, a device —
/// which would block forever or never end if it were opened and read like a file.
pub(crate) fn regular(tool: &str, rel: &str, meta: &std::fs::Metadata) -> Result<(), ToolError> {
    if meta.is_file() || meta.is_dir() {
        return Ok(());
    }
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            "a named pipe"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        }
    };
    #[cfg(not(unix))]
    let kind = "not a regular file";
    Err(fail(
        tool,
        format!(
            "`{rel}` is {kind}, not a regular file; the file tools read and write regular files only"
        ),
    ))
}

/// A directory outside the workspace that the file tools may also use (`write_roots`).
#[derive(Debug, Clone)]
pub(crate) struct WriteRoot {
    /// The directory as the settings name it (absolute).
    pub(crate) given: PathBuf,
    /// The directory with every symlink resolved.
    pub(crate) real: PathBuf,
}

/// The workspace root a call works in, and the write roots it may also use.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// The root as the execution environment names it.
    given: PathBuf,
    /// The root with every symlink resolved.
    root: PathBuf,
    /// The write roots (none for the shell).
    roots: Arc<[WriteRoot]>,
}

/// A path resolved inside the workspace or a write root.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The real path (symlinks in its existing part resolved).
    pub(crate) abs: PathBuf,
    /// The path relative to the workspace root, `/`-separated (`.` for the root itself); the
    /// absolute real path for one in a write root.
    pub(crate) rel: String,
    /// Whether it is in a write root rather than the workspace.
    pub(crate) in_write_root: bool,
    /// What the path names (as `std::fs::metadata` gives it), when it exists and was looked
    /// at while resolving it.
    pub(crate) meta: Option<std::fs::Metadata>,
}

impl Workspace {
    /// The workspace of the call's execution environment.
    pub(crate) fn of(ctx: &ToolContext, tool: &str) -> Result<Self, ToolError> {
        let Some(env) = ctx.exec_env() else {
            return Err(ToolError::Fatal(format!(
                "{tool}: no workspace is available to this tool here (the host gave it no execution environment)"
            )));
        };
        Self::at(env.workspace(), tool)
    }

    /// The workspace rooted at `given`.
    pub(crate) fn at(given: &Path, tool: &str) -> Result<Self, ToolError> {
        let root = noeta_core::exec::real_root(given).map_err(|err| {
            ToolError::Fatal(format!(
                "{tool}: the workspace `{}` is not usable: {err}",
                given.display()
            ))
        })?;
        Ok(Self {
            given: given.to_path_buf(),
            root,
            roots: Arc::from(Vec::new()),
        })
    }

    /// The same workspace, with `roots` allowed besides it.
    pub(crate) fn with_roots(mut self, roots: &Arc<[WriteRoot]>) -> Self {
        self.roots = Arc::clone(roots);
        self
    }

    /// What refusals name as allowed: the workspace, and the write roots when there are any.
    fn allowed(&self) -> String {
        let workspace = format!("the workspace `{}`", self.given.display());
        if self.roots.is_empty() {
            return workspace;
        }
        let roots: Vec<String> = self
            .roots
            .iter()
            .map(|r| format!("`{}`", r.given.display()))
            .collect();
        format!("{workspace} and the write roots {}", roots.join(", "))
    }

    /// The real place `normal` (absolute, normalised) names before its symlinks are
    /// followed: under the workspace root, else under a write root.
    fn place(&self, normal: &Path) -> Option<PathBuf> {
        std::iter::once((&self.given, &self.root))
            .chain(self.roots.iter().map(|r| (&r.given, &r.real)))
            .find_map(|(given, real)| {
                normal
                    .strip_prefix(real)
                    .or_else(|_| normal.strip_prefix(given))
                    .ok()
                    .map(|rest| real.join(rest))
            })
    }

    /// `path` as it is when it lies under the (real) root or a write root and none of its
    /// parts below that is a symlink — one `lstat` a part instead of resolving the whole
    /// path; `None` when a part is a symlink or cannot be looked at (resolve it then).
    /// `last` is the path's own `lstat`, when already made.
    fn without_links(&self, path: &Path, last: Option<&std::fs::Metadata>) -> Option<PathBuf> {
        let base = std::iter::once(self.root.as_path())
            .chain(self.roots.iter().map(|r| r.real.as_path()))
            .find(|base| path.starts_with(base))?;
        let parts: Vec<Component<'_>> = path.strip_prefix(base).ok()?.components().collect();
        let mut at = base.to_path_buf();
        for (i, part) in parts.iter().enumerate() {
            let Component::Normal(name) = part else {
                return None;
            };
            at.push(name);
            let link = match last.filter(|_| i + 1 == parts.len()) {
                Some(meta) => meta.file_type().is_symlink(),
                None => at.symlink_metadata().ok()?.file_type().is_symlink(),
            };
            if link {
                return None;
            }
        }
        Some(at)
    }

    /// Whether the real path `real` is in the workspace or a write root.
    fn inside(&self, real: &Path) -> bool {
        real.starts_with(&self.root) || self.roots.iter().any(|r| real.starts_with(&r.real))
    }

    /// The root with every symlink resolved.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `input` (relative to the root, or absolute inside it or inside a write root);
    /// refuses paths outside them and symlinks that lead out of them. A path whose real place
    /// is in the workspace is the workspace's, however it was named.
    pub(crate) fn resolve(&self, tool: &str, input: &str) -> Result<Target, ToolError> {
        if input.trim().is_empty() {
            return Err(fail(tool, "the path is empty"));
        }
        let outside = || fail(tool, format!("`{input}` is outside {}", self.allowed()));
        // A name that is not UTF-8 is shown with its odd bytes as `\xNN` (see `shown`); such a
        // path, given back, names the file — unless a file of that very name exists.
        let unescaped = unescape(input).filter(|raw| {
            let literal = self.root.join(input);
            literal.symlink_metadata().is_err() && self.root.join(raw).symlink_metadata().is_ok()
        });
        let path = unescaped.as_deref().unwrap_or_else(|| Path::new(input));
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let normal = normalize(&joined).ok_or_else(outside)?;
        // The deepest part that exists is resolved through its symlinks; the rest is new.
        let mut existing = self.place(&normal).ok_or_else(outside)?;
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        let found = loop {
            if let Ok(meta) = existing.symlink_metadata() {
                break Some(meta);
            }
            let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                break None;
            };
            missing.push(name);
            if !existing.pop() {
                break None;
            }
        };
        // What the path names, when it exists and is not a symlink (its `lstat` is its `stat`).
        let real = self
            .without_links(&existing, found.as_ref())
            .map_or_else(|| std::fs::canonicalize(&existing), Ok);
        let real = real.map_err(|err| {
            fail(
                tool,
                format!(
                    "`{input}` cannot be resolved ({}: {err}); a broken symlink is not followed",
                    existing.display()
                ),
            )
        })?;
        if !self.inside(&real) {
            return Err(fail(
                tool,
                format!(
                    "`{input}` leads through a symlink to `{}`, outside {}",
                    real.display(),
                    self.allowed()
                ),
            ));
        }
        let meta = found.filter(|m| missing.is_empty() && !m.file_type().is_symlink());
        let mut abs = real;
        for name in missing.iter().rev() {
            abs.push(name);
        }
        let in_write_root = !abs.starts_with(&self.root);
        let rel = self.relative(&abs);
        Ok(Target {
            abs,
            rel,
            in_write_root,
            meta,
        })
    }

    /// `path` (a real path) relative to the root, `/`-separated; absolute when it is not
    /// under the root (in a write root).
    pub(crate) fn relative(&self, path: &Path) -> String {
        let Ok(rest) = path.strip_prefix(&self.root) else {
            return path.display().to_string();
        };
        let parts: Vec<String> = rest.components().map(|c| shown(c.as_os_str())).collect();
        if parts.is_empty() {
            ".".to_owned()
        } else {
            parts.join("/")
        }
    }
}

/// A file name as the tools show it: UTF-8 as it is, each byte that is not UTF-8 as `\xNN`,
/// so a name is never shown with a replacement character and can be given back (`unescape`).
pub(crate) fn shown(name: &std::ffi::OsStr) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut bytes = name.as_bytes();
        let mut out = String::with_capacity(bytes.len());
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    out.push_str(text);
                    return out;
                }
                Err(err) => {
                    let (good, rest) = bytes.split_at(err.valid_up_to());
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    let bad = err.error_len().unwrap_or(rest.len());
                    for byte in &rest[..bad] {
                        out.push_str(&format!("\\x{byte:02x}"));
                    }
                    bytes = &rest[bad..];
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        name.to_string_lossy().into_owned()
    }
}

/// `input` with each `\xNN` turned back into its byte, when it has any: the path a name shown
/// by [`shown`] stands for.
fn unescape(input: &str) -> Option<PathBuf> {
    if !input.contains("\\x") {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        let raw = input.as_bytes();
        let mut out = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let hex = raw
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok());
            match (
                raw[i],
                raw.get(i + 1),
                hex.and_then(|h| u8::from_str_radix(h, 16).ok()),
            ) {
                (b'\\', Some(b'x'), Some(byte)) => {
                    out.push(byte);
                    i += 4;
                }
                (byte, _, _) => {
                    out.push(byte);
                    i += 1;
                }
            }
        }
        Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Removes `.` and resolves `..` lexically; `None` when `..` climbs above the filesystem root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// Set once the tool call that handed work to a helper thread no longer waits for it: it was
/// cancelled (its future dropped — Ctrl-C, a lost lease, a cancelled task) or it is done.
/// Long work checks it between steps and stops.
#[derive(Clone, Default)]
pub(crate) struct Cancelled(Arc<AtomicBool>);

impl Cancelled {
    /// Whether the caller stopped waiting.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `reader`, failing its next read once the caller stopped waiting.
    pub(crate) fn reader<R: Read>(&self, reader: R) -> Interruptible<R> {
        Interruptible {
            inner: reader,
            cancelled: self.clone(),
        }
    }
}

/// A reader that stops with an error once its [`Cancelled`] is set.
pub(crate) struct Interruptible<R> {
    inner: R,
    cancelled: Cancelled,
}

impl<R: Read> Read for Interruptible<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancelled.is_set() {
            // Not `Interrupted`, which readers retry.
            return Err(std::io::Error::other("the tool call was cancelled"));
        }
        self.inner.read(buf)
    }
}

/// Sets the flag when the waiting future ends, however it ends.
struct SetOnDrop(Cancelled);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.0.store(true, Ordering::Relaxed);
    }
}

/// Runs blocking `work` on a helper thread (`noeta-<tool>`), so a long walk, search or read
/// does not hold the async executor. Dropping the returned future (cancelling the call) sets
/// the [`Cancelled`] `work` is given, so the thread stops too instead of running on unseen.
pub(crate) async fn off_thread<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce(&Cancelled) -> T + Send + 'static,
) -> Result<T, ToolError> {
    let cancelled = Cancelled::default();
    let _stop = SetOnDrop(cancelled.clone());
    let (done, result) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("noeta-{tool}"))
        .spawn(move || {
            let _ = done.send(work(&cancelled));
        })
        .map_err(|err| ToolError::Fatal(format!("{tool}: cannot start a helper thread: {err}")))?;
    result
        .await
        .map_err(|_| ToolError::Fatal(format!("{tool}: the helper thread stopped")))
}

/// Lines as `cat -n` prints them (`%6d\t`), numbered from `first`.
pub(crate) fn numbered<'a>(first: usize, lines: impl Iterator<Item = &'a str>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{:>6}\t", first + i);
        out.push_str(line);
    }
    out
}

/// A file tool's description `base`, naming the write roots when there are any.
pub(crate) fn described(base: &str, roots: &[WriteRoot]) -> String {
    if roots.is_empty() {
        return base.to_owned();
    }
    let roots: Vec<String> = roots
        .iter()
        .map(|r| format!("`{}`", r.real.display()))
        .collect();
    format!(
        "{base} Besides the workspace, files under these directories may be used by absolute path: {}.",
        roots.join(", ")
    )
}
