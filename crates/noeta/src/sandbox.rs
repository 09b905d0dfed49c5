//! Binding the execution environment: `local` (no sandbox) unless the settings name a
//! `sandbox_provider` contribution (`[plugins.sandbox] provider`, or `--sandbox`). Nothing is
//! bound by itself, and a sandbox that cannot be built stops the host rather than fall back
//! to running commands unsandboxed.

use std::sync::Arc;

use noeta_core::exec::{ExecEnv, LocalExecEnv};
use noeta_core::sandbox::SandboxProvider;
use noeta_core::surface::names::SANDBOX_PROVIDER;
use noeta_core::{Merged, PluginSet, Resolved};
use serde_json::Value;

use crate::host::HostError;
use crate::settings::Settings;

/// The name of the environment without a sandbox.
pub const LOCAL: &str = "local";

/// The provider the settings name (`local` when none).
pub fn provider_name(settings: &Settings) -> String {
    settings
        .params("sandbox")
        .and_then(|params| params.get("provider"))
        .and_then(Value::as_str)
        .unwrap_or(LOCAL)
        .to_owned()
}

/// The sandbox the settings chose: its name, its provider and its settings.
pub(crate) struct Chosen {
    pub(crate) name: String,
    pub(crate) provider: SandboxProvider,
    pub(crate) params: Value,
}

/// The environment commands run in: `local` itself, or the named sandbox built over it (and
/// then the sandbox, which a browser the host starts runs in too).
pub(crate) fn bind(
    settings: &Settings,
    set: &PluginSet,
    merged: &Merged,
    local: Arc<LocalExecEnv>,
) -> Result<(Arc<dyn ExecEnv>, Option<Chosen>), HostError> {
    let name = provider_name(settings);
    if name == LOCAL {
        return Ok((local, None));
    }
    let providers = merged.for_surface(SANDBOX_PROVIDER);
    let Some(entry) = providers.iter().find(|e| e.contribution.name == name) else {
        let mut known: Vec<&str> = vec![LOCAL];
        known.extend(providers.iter().map(|e| e.contribution.name.as_str()));
        return Err(HostError::Sandbox(format!(
            "[plugins.sandbox] provider: no sandbox provider `{name}` (known: {})",
            known.join(", ")
        )));
    };
    let resolved = set
        .resolve_contribution(&entry.plugin, SANDBOX_PROVIDER, &name)
        .map_err(|err| HostError::Sandbox(err.to_string()))?;
    let provider = match &resolved {
        Resolved::SandboxProvider(value) => value.downcast::<SandboxProvider>(),
        _ => None,
    }
    .ok_or_else(|| {
        HostError::Sandbox(format!(
            "plugin `{}`: sandbox provider `{name}` is not a sandbox this host can bind",
            entry.plugin
        ))
    })?;
    let params = settings
        .params("sandbox")
        .map(|p| Value::Object(p.clone()))
        .unwrap_or(Value::Null);
    let env = provider
        .0
        .build(local, &params)
        .map_err(|why| HostError::Sandbox(format!("sandbox `{name}`: {why}")))?;
    Ok((
        env,
        Some(Chosen {
            name,
            provider: provider.clone(),
            params,
        }),
    ))
}
