//! The `sandbox` built-in plugin: sandboxed execution environments a deployment can bind.
//!
//! Each is a `sandbox_provider` contribution; the host binds the one its settings name
//! (`[plugins.sandbox] provider`, or `--sandbox`), never one by itself. Today: `bubblewrap`,
//! a namespace sandbox (`bwrap.rs`).

mod bwrap;
mod cgroup;

use std::sync::Arc;

use noeta_core::sandbox::SandboxProvider;
use noeta_core::{HostValue, LinkedPlugin, RefTable, Resolved};

pub use bwrap::NAME as BUBBLEWRAP;

/// The namespace sandbox, as its `sandbox_provider` contribution resolves to.
pub fn bubblewrap() -> SandboxProvider {
    SandboxProvider(Arc::new(bwrap::Bubblewrap))
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("bubblewrap", |_| {
            Ok(Resolved::SandboxProvider(HostValue::new(bubblewrap())))
        }),
    )
}
