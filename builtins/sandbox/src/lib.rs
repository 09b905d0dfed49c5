//! The `sandbox` built-in plugin: sandboxed execution environments a deployment can bind.
//!
//! Each is a `sandbox_provider` contribution; the host binds the one its settings name
//! (`[plugins.sandbox] provider`, or `--sandbox`), never one by itself: `bubblewrap`, a
//! namespace sandbox (`bwrap.rs`), and `container`, a container per task over Podman or
//! Docker (`container.rs`, built with the cargo feature `container`; without it the provider
//! is declared and refuses to be bound, saying so).

mod bwrap;
mod cgroup;
#[cfg(feature = "container")]
mod container;

use std::sync::Arc;

use noeta_core::sandbox::SandboxProvider;
use noeta_core::{HostValue, LinkedPlugin, RefTable, Resolved};

pub use bwrap::NAME as BUBBLEWRAP;

/// The container sandbox's provider name.
pub const CONTAINER: &str = "container";

/// The namespace sandbox, as its `sandbox_provider` contribution resolves to.
pub fn bubblewrap() -> SandboxProvider {
    SandboxProvider(Arc::new(bwrap::Bubblewrap))
}

/// The container sandbox, as its `sandbox_provider` contribution resolves to.
#[cfg(feature = "container")]
pub fn container() -> SandboxProvider {
    SandboxProvider(Arc::new(container::Container))
}

/// The container sandbox of a build without the `container` feature: it refuses to be bound.
#[cfg(not(feature = "container"))]
pub fn container() -> SandboxProvider {
    SandboxProvider(Arc::new(NotBuilt))
}

/// What `container` resolves to without the `container` feature.
#[cfg(not(feature = "container"))]
struct NotBuilt;

#[cfg(not(feature = "container"))]
impl noeta_core::sandbox::SandboxFactory for NotBuilt {
    fn build(
        &self,
        _local: Arc<noeta_core::exec::LocalExecEnv>,
        _params: &serde_json::Value,
    ) -> Result<Arc<dyn noeta_core::exec::ExecEnv>, String> {
        Err(NOT_BUILT.to_owned())
    }

    fn prune(
        &self,
        _params: &serde_json::Value,
        _workspace: &std::path::Path,
    ) -> Result<Vec<String>, String> {
        Err(NOT_BUILT.to_owned())
    }
}

#[cfg(not(feature = "container"))]
const NOT_BUILT: &str = "this noeta was built without the container sandbox: build it with \
    `cargo install noeta-cli --features container` (or `cargo build --features container`)";

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("bubblewrap", |_| {
                Ok(Resolved::SandboxProvider(HostValue::new(bubblewrap())))
            })
            .with("container", |_| {
                Ok(Resolved::SandboxProvider(HostValue::new(container())))
            }),
    )
}

#[cfg(all(test, not(feature = "container")))]
mod tests {
    use super::*;

    #[test]
    fn without_the_feature_the_container_sandbox_says_how_to_get_it() {
        let local = Arc::new(noeta_core::exec::LocalExecEnv::new("."));
        let Err(why) = container().0.build(local, &serde_json::Value::Null) else {
            panic!("a container sandbox was built without the feature");
        };
        assert!(why.contains("--features container"), "{why}");
    }
}
