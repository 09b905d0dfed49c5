//! What loading plugins reports: a plugin that could not be loaded ([`LoadProblem`]), what is
//! worth telling but does not stop loading ([`LoadWarning`]), and what stops it altogether
//! ([`LoadError`]).

use std::fmt;
use std::path::PathBuf;

use semver::Version;

use super::SourceKind;
use crate::manifest::{ManifestError, Origin};

/// A plugin that could not be loaded; it fails only the agents that activate it.
#[derive(Debug)]
pub struct LoadProblem {
    /// The plugin's name, when known (else the directory name it would have had).
    pub plugin: Option<String>,
    /// Where it came from.
    pub origin: Origin,
    /// What kind of source.
    pub source: SourceKind,
    /// What went wrong.
    pub error: ProblemError,
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProblemError {
    /// Its manifest could not be read or parsed.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Its `requires-noeta` range excludes this kernel and loading is strict.
    #[error(
        "plugin `{plugin}` ({origin}) requires noeta {range}, but the kernel is {kernel} — refused (strict)"
    )]
    Refused {
        /// The plugin.
        plugin: String,
        /// Its origin.
        origin: Origin,
        /// The range it declares.
        range: String,
        /// The kernel version.
        kernel: Version,
    },
}

impl fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)
    }
}

/// Something worth telling the user that does not stop loading.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadWarning {
    /// A linked crate shadows an on-disk plugin of the same name.
    Shadowed {
        /// The shared name.
        plugin: String,
        /// The linked crate.
        linked: Origin,
        /// The on-disk manifest that is ignored.
        on_disk: Origin,
    },
    /// A workspace plugin directory is not trusted: not in the trust store, or its workspace
    /// changed since it was trusted.
    Untrusted {
        /// The directory.
        dir: PathBuf,
        /// The trust store consulted.
        store: PathBuf,
        /// Why, when the store lists it (what changed since).
        why: Option<String>,
    },
    /// A plugin's range excludes this kernel; it loads anyway (refused under strict).
    Unsatisfied {
        /// The plugin.
        plugin: String,
        /// Its origin.
        origin: Origin,
        /// The range.
        range: String,
        /// The kernel version.
        kernel: Version,
    },
    /// A plugin's range cannot be parsed; it is never enforced.
    Unparseable {
        /// The plugin.
        plugin: String,
        /// Its origin.
        origin: Origin,
        /// The range.
        range: String,
        /// Why it did not parse.
        reason: String,
    },
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadWarning::Shadowed {
                plugin,
                linked,
                on_disk,
            } => write!(
                f,
                "plugin `{plugin}` from {linked} shadows the on-disk plugin of the same name at {on_disk}, which is ignored"
            ),
            LoadWarning::Untrusted { dir, store, .. } if store.as_os_str().is_empty() => write!(
                f,
                "skipping untrusted workspace plugin directory `{}` — there is no trust store (no home directory)",
                dir.display()
            ),
            LoadWarning::Untrusted {
                dir,
                store,
                why: Some(why),
            } => write!(
                f,
                "skipping workspace plugin directory `{}`: {why} — run `noeta trust` on the workspace again to load its plugins (trust store `{}`)",
                dir.display(),
                store.display()
            ),
            LoadWarning::Untrusted {
                dir,
                store,
                why: None,
            } => write!(
                f,
                "skipping untrusted workspace plugin directory `{}` — run `noeta trust {}` to load its plugins (trust store `{}`)",
                dir.display(),
                dir.display(),
                store.display()
            ),
            LoadWarning::Unsatisfied {
                plugin,
                origin,
                range,
                kernel,
            } => write!(
                f,
                "plugin `{plugin}` ({origin}) requires noeta {range}, but the kernel is {kernel} — loading it anyway"
            ),
            LoadWarning::Unparseable {
                plugin,
                origin,
                range,
                reason,
            } => write!(
                f,
                "plugin `{plugin}` ({origin}) declares requires-noeta `{range}`, which is not a semver range ({reason}) — not enforced"
            ),
        }
    }
}

/// Errors that stop loading altogether.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A built-in that cannot be dropped was listed in `disabled_builtins`.
    #[error("built-in `{plugin}` cannot be disabled: {why}")]
    NonRemovable {
        /// The built-in.
        plugin: String,
        /// Why it is required.
        why: String,
    },
    /// Two crates, or two on-disk plugins, share a name.
    #[error("duplicate plugin name `{plugin}`: found in both {first} and {second}")]
    DuplicateName {
        /// The shared name.
        plugin: String,
        /// One origin.
        first: Origin,
        /// The other origin.
        second: Origin,
    },
    /// A linked crate's embedded manifest is invalid (a bug in that crate).
    #[error("linked plugin manifest is invalid: {0}")]
    LinkedManifest(#[source] Box<ManifestError>),
}
