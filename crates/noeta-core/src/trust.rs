//! The trust store: which workspace plugin directories may load their plugins.
//!
//! A JSON file (`{"trusted": [paths…]}`, by default `~/.noeta/trust.json`).
//! Paths are canonicalised on write and on compare: `~` expanded, made
//! absolute, symlinks resolved. A missing store trusts nothing; a malformed
//! one is an error, never read as empty.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors reading or writing the trust store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The store could not be read.
    #[error("cannot read trust store `{path}`: {source}")]
    Read {
        /// The store's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The store is not the expected JSON.
    #[error(
        "trust store `{path}` is not valid JSON of the form {{\"trusted\": [paths]}}: {source}"
    )]
    Malformed {
        /// The store's path.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The store could not be written.
    #[error("cannot write trust store `{path}`: {source}")]
    Write {
        /// The store's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The directory to trust does not exist.
    #[error("cannot trust `{path}`: {source}")]
    NoSuchDirectory {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    trusted: Vec<PathBuf>,
}

/// The loaded trust store.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    path: PathBuf,
    home: PathBuf,
    trusted: BTreeSet<PathBuf>,
}

impl TrustStore {
    /// A store that trusts nothing and is never written (for hosts without a home directory).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Loads the store at `path`; `home` expands `~` in the stored and compared paths.
    pub fn load(path: &Path, home: &Path) -> Result<Self, TrustError> {
        let mut store = Self {
            path: path.to_path_buf(),
            home: home.to_path_buf(),
            trusted: BTreeSet::new(),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(store),
            Err(source) => {
                return Err(TrustError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let file: TrustFile =
            serde_json::from_str(&text).map_err(|source| TrustError::Malformed {
                path: path.to_path_buf(),
                source,
            })?;
        store.trusted = file
            .trusted
            .iter()
            .map(|p| canonical_path(p, home))
            .collect();
        Ok(store)
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trusted directories, canonical and sorted.
    pub fn trusted(&self) -> impl Iterator<Item = &Path> {
        self.trusted.iter().map(PathBuf::as_path)
    }

    /// Whether `dir` is trusted: the store lists it, or lists the workspace whose `.noeta/plugins` it is.
    pub fn is_trusted(&self, dir: &Path) -> bool {
        let dir = canonical_path(dir, &self.home);
        if self.trusted.contains(&dir) {
            return true;
        }
        let workspace = dir
            .strip_suffix_components(&[".noeta", "plugins"])
            .map(Path::to_path_buf);
        workspace.is_some_and(|ws| self.trusted.contains(&ws))
    }

    /// Adds `dir` (which must exist) and writes the store; idempotent. Returns the canonical path stored.
    pub fn grant(&mut self, dir: &Path) -> Result<PathBuf, TrustError> {
        let expanded = expand_home(dir, &self.home);
        let metadata =
            std::fs::metadata(&expanded).map_err(|source| TrustError::NoSuchDirectory {
                path: expanded.clone(),
                source,
            })?;
        if !metadata.is_dir() {
            return Err(TrustError::NoSuchDirectory {
                path: expanded,
                source: std::io::Error::other("not a directory"),
            });
        }
        let canonical = canonical_path(dir, &self.home);
        self.trusted.insert(canonical.clone());
        let file = TrustFile {
            trusted: self.trusted.iter().cloned().collect(),
        };
        let write = |source| TrustError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        let mut text =
            serde_json::to_string_pretty(&file).map_err(|source| TrustError::Malformed {
                path: self.path.clone(),
                source,
            })?;
        text.push('\n');
        std::fs::write(&self.path, text).map_err(write)?;
        Ok(canonical)
    }
}

trait StripComponents {
    fn strip_suffix_components(&self, suffix: &[&str]) -> Option<&Path>;
}

impl StripComponents for Path {
    fn strip_suffix_components(&self, suffix: &[&str]) -> Option<&Path> {
        let mut path = self;
        for part in suffix.iter().rev() {
            if path.file_name()? != *part {
                return None;
            }
            path = path.parent()?;
        }
        Some(path)
    }
}

fn expand_home(path: &Path, home: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// `~` expanded, made absolute, symlinks resolved where the path exists, `.` and `..` removed otherwise.
pub fn canonical_path(path: &Path, home: &Path) -> PathBuf {
    let expanded = expand_home(path, home);
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&expanded))
            .unwrap_or(expanded)
    };
    if let Ok(real) = std::fs::canonicalize(&absolute) {
        return real;
    }
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
