//! Sandboxed execution environments: what a `sandbox_provider` contribution resolves to.
//!
//! A plugin's `sandbox_provider` ref resolves to a [`HostValue`](crate::HostValue) holding a
//! [`SandboxProvider`]. The host binds at most one, chosen by name in its settings (never
//! automatically), builds it over the local environment that runs the processes, and gives
//! the result to the runtime: every command a tool, a skill script or a hook runs then goes
//! through it.

use std::sync::Arc;

use serde_json::Value;

use crate::exec::{ExecEnv, LocalExecEnv};

/// Builds a sandboxed execution environment.
pub trait SandboxFactory: Send + Sync {
    /// The environment for a workspace: `local` runs the processes (process groups,
    /// deadlines, output capture, stopping) and the sandbox wraps every command it is given;
    /// `params` are the sandbox plugin's settings. `Err` says why it cannot be built (a
    /// missing program, a setting it refuses), and the host refuses to run rather than fall
    /// back to the unsandboxed environment.
    fn build(&self, local: Arc<LocalExecEnv>, params: &Value) -> Result<Arc<dyn ExecEnv>, String>;

    /// The command line to put before a browser's so that it runs in this sandbox, with
    /// `writable` (its profiles) the only place it may write and the network on (a browser
    /// has no use without it); `params` are the sandbox plugin's settings. `Ok(None)`: this
    /// sandbox cannot hold a browser, and the host runs none rather than one outside it.
    fn browser_prefix(
        &self,
        _params: &Value,
        _writable: &std::path::Path,
    ) -> Result<Option<Vec<String>>, String> {
        Ok(None)
    }

    /// Removes what this sandbox left behind for `workspace` (containers a task kept after
    /// its host went away), returning what it removed; `params` are the sandbox plugin's
    /// settings. The default: nothing is ever left behind.
    fn prune(&self, _params: &Value, _workspace: &std::path::Path) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// The value a `sandbox_provider` contribution resolves to (inside a `HostValue`).
#[derive(Clone)]
pub struct SandboxProvider(pub Arc<dyn SandboxFactory>);

impl std::fmt::Debug for SandboxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SandboxProvider")
    }
}
