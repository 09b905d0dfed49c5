//! Binding the browser backend of the `browser` built-in: a host that runs tasks for people
//! (`HostConfig::browser`) binds one from `[plugins.browser]` — a local Chromium when one is
//! installed and nothing else is said, an attached one with `cdp_url`, none with
//! `backend = "none"`. Task profiles live under `~/.noeta/browser/`.

use std::sync::Arc;

use noeta_builtin_browser::{Backend, Config};
use serde_json::Value;

use crate::host::{HostError, HostPaths};
use crate::settings::Settings;

/// The backend the settings ask for; `None` when they turn it off or no browser is installed.
pub(crate) fn bind(
    settings: &Settings,
    paths: &HostPaths,
) -> Result<Option<Arc<Backend>>, HostError> {
    let params = settings
        .params("browser")
        .map(|p| Value::Object(p.clone()))
        .unwrap_or(Value::Null);
    let profiles = paths
        .user_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("noeta"))
        .join("browser");
    Config::parse(&params, &profiles)
        .map(|config| config.map(|c| Arc::new(Backend::new(c))))
        .map_err(HostError::Browser)
}
