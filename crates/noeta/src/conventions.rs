//! Where a host looks for things (`HostPaths`) and which built-ins it runs for every agent
//! (`ALWAYS_ON`, `DEFAULT_PLUGINS`, and those that cannot be switched off): the conventions the
//! settings, the loader and the assembly all read, below each of them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use noeta_core::{TrustError, TrustStore};

/// The plugins the default agent `main` activates (on top of [`ALWAYS_ON`]): the official
/// preset's.
pub const DEFAULT_PLUGINS: [&str; 5] = noeta_builtin_presets::MAIN_PLUGINS;

/// Built-ins active for every agent: guards and observers of governance are
/// process-wide anyway; the host-wired built-ins are backends; `mcp` offers the configured
/// servers' tools (nothing when none is configured), as Claude Code gives every agent its
/// MCP tools.
pub const ALWAYS_ON: [&str; 9] = [
    "governance",
    "mcp",
    "providers",
    "react",
    "reminders",
    "sandbox",
    "skills",
    "storage",
    "workspace",
];

/// Built-ins that `disabled_builtins` cannot drop, with the reason given to the user.
pub fn non_removable() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "react".to_owned(),
        "it supplies the default decision loop — replace it through the `policy` surface instead"
            .to_owned(),
    )])
}

/// Where a host looks for things.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// The user's home directory; without one, no user plugins and an empty trust store.
    pub home: Option<PathBuf>,
    /// The workspace the host runs in.
    pub workspace: PathBuf,
}

impl HostPaths {
    /// Paths from the process environment: `$HOME` and the current directory.
    pub fn from_env() -> std::io::Result<Self> {
        Ok(Self {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            workspace: std::env::current_dir()?,
        })
    }

    /// `~/.noeta`.
    pub fn user_dir(&self) -> Option<PathBuf> {
        self.home.as_ref().map(|h| h.join(".noeta"))
    }

    /// `~/.noeta/plugins`.
    pub fn user_plugin_dir(&self) -> Option<PathBuf> {
        self.user_dir().map(|d| d.join("plugins"))
    }

    /// `<workspace>/.noeta/plugins`.
    pub fn workspace_plugin_dir(&self) -> PathBuf {
        self.workspace.join(".noeta").join("plugins")
    }

    /// `~/.noeta/trust.json`.
    pub fn trust_store_path(&self) -> Option<PathBuf> {
        self.user_dir().map(|d| d.join("trust.json"))
    }

    /// Loads the trust store (empty without a home directory).
    pub fn trust_store(&self) -> Result<TrustStore, TrustError> {
        match (&self.trust_store_path(), &self.home) {
            (Some(path), Some(home)) => TrustStore::load(path, home),
            _ => Ok(TrustStore::empty()),
        }
    }
}

/// How much a permission mode lets an agent do without asking: `plan` least, then `default`,
/// `acceptEdits`, `bypassPermissions`; a mode that is none of them counts as the loosest.
pub fn looseness(mode: &str) -> usize {
    ["plan", "default", "acceptEdits", "bypassPermissions"]
        .iter()
        .position(|m| *m == mode)
        .unwrap_or(usize::MAX)
}
