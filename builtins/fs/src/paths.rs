//! The workspace fence: resolving a tool's path argument inside the workspace root.

use std::path::{Component, Path, PathBuf};

use noeta_core::{ToolContext, ToolError, ToolFlags};

/// The flags of the reading tools (Read, Glob, Grep): read-only and safe while planning,
/// clearable, safe to rerun, their results clipped past `max_chars`.
pub(crate) fn reading_flags(max_chars: usize) -> ToolFlags {
    let mut flags = ToolFlags::read_only();
    flags.clearable = true;
    flags.retry_safe = true;
    flags.max_result_chars = Some(max_chars);
    flags
}

/// A model-visible failure of `tool`: `<Tool>: <message>`.
pub(crate) fn fail(tool: &str, message: impl std::fmt::Display) -> ToolError {
    ToolError::RespondToModel(format!("{tool}: {message}"))
}

/// The workspace root a call works in.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// The root as the execution environment names it.
    given: PathBuf,
    /// The root with every symlink resolved.
    root: PathBuf,
}

/// A path resolved inside the workspace.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The real path (symlinks in its existing part resolved).
    pub(crate) abs: PathBuf,
    /// The path relative to the workspace root, `/`-separated (`.` for the root itself).
    pub(crate) rel: String,
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
        let root = std::fs::canonicalize(given).map_err(|err| {
            ToolError::Fatal(format!(
                "{tool}: the workspace `{}` is not usable: {err}",
                given.display()
            ))
        })?;
        Ok(Self {
            given: given.to_path_buf(),
            root,
        })
    }

    /// The root with every symlink resolved.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `input` (relative to the root, or absolute inside it); refuses paths outside
    /// the workspace and symlinks that lead out of it.
    pub(crate) fn resolve(&self, tool: &str, input: &str) -> Result<Target, ToolError> {
        if input.trim().is_empty() {
            return Err(fail(tool, "the path is empty"));
        }
        let outside = || {
            fail(
                tool,
                format!(
                    "`{input}` is outside the workspace `{}`",
                    self.given.display()
                ),
            )
        };
        let path = Path::new(input);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let normal = normalize(&joined).ok_or_else(outside)?;
        let rest = normal
            .strip_prefix(&self.root)
            .or_else(|_| normal.strip_prefix(&self.given))
            .map_err(|_| outside())?
            .to_path_buf();
        // The deepest part that exists is resolved through its symlinks; the rest is new.
        let mut existing = self.root.join(&rest);
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        while existing.symlink_metadata().is_err() {
            let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                break;
            };
            missing.push(name);
            if !existing.pop() {
                break;
            }
        }
        let real = std::fs::canonicalize(&existing).map_err(|err| {
            fail(
                tool,
                format!(
                    "`{input}` cannot be resolved ({}: {err}); a broken symlink is not followed",
                    existing.display()
                ),
            )
        })?;
        if !real.starts_with(&self.root) {
            return Err(fail(
                tool,
                format!(
                    "`{input}` leads through a symlink to `{}`, outside the workspace `{}`",
                    real.display(),
                    self.given.display()
                ),
            ));
        }
        let mut abs = real;
        for name in missing.iter().rev() {
            abs.push(name);
        }
        let rel = self.relative(&abs);
        Ok(Target { abs, rel })
    }

    /// `path` (under the real root) relative to the root, `/`-separated.
    pub(crate) fn relative(&self, path: &Path) -> String {
        let rest = path.strip_prefix(&self.root).unwrap_or(path);
        let parts: Vec<String> = rest
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.is_empty() {
            ".".to_owned()
        } else {
            parts.join("/")
        }
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

/// Runs blocking `work` on a helper thread, so a long walk does not hold the async executor.
pub(crate) async fn off_thread<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    let (done, result) = futures::channel::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    result
        .await
        .map_err(|_| ToolError::Fatal(format!("{tool}: the search thread stopped")))
}

/// Lines as `cat -n` prints them (`%6d\t`), numbered from `first`.
pub(crate) fn numbered<'a>(first: usize, lines: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{:>6}\t{line}", first + i));
    }
    out
}
