//! Binding the browser backend of the `browser` built-in: a host that runs tasks for people
//! (`HostConfig::browser`) binds one from `[plugins.browser]` — a local Chromium when one is
//! installed and nothing else is said, an attached one with `cdp_url`, none with
//! `backend = "none"`. Task profiles live under `~/.noeta/browser/`. When a sandbox runs the
//! commands (`[plugins.sandbox] provider`), a browser the backend starts runs in that sandbox.

use std::sync::Arc;

use noeta_builtin_browser::{Backend, Config, Launch};
use serde_json::Value;

use crate::conventions::HostPaths;
use crate::host::HostError;
use crate::sandbox::Chosen;
use crate::settings::Settings;

/// The backend the settings ask for; `None` when they turn it off or no browser is installed.
/// With a sandbox chosen for commands, a browser the backend starts runs in it too; a sandbox
/// that cannot hold one is an error, never a browser outside it.
pub(crate) fn bind(
    settings: &Settings,
    paths: &HostPaths,
    sandbox: Option<&Chosen>,
) -> Result<Option<Arc<Backend>>, HostError> {
    let params = settings
        .params("browser")
        .map(|p| Value::Object(p.clone()))
        .unwrap_or(Value::Null);
    let profiles = paths
        .user_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("noeta"))
        .join("browser");
    let Some(mut config) = Config::parse(&params, &profiles).map_err(HostError::Browser)? else {
        return Ok(None);
    };
    if let (Some(chosen), Launch::Local { .. }) = (sandbox, &config.launch) {
        let prefix = chosen
            .provider
            .0
            .browser_prefix(&chosen.params, &profiles)
            .map_err(|why| HostError::Browser(format!("sandbox `{}`: {why}", chosen.name)))?;
        config.wrapper = match prefix {
            Some(prefix) => prefix,
            // A browser nobody asked for (found on PATH) is left out under such a sandbox.
            None if params.get("backend").is_none() => return Ok(None),
            None => {
                return Err(HostError::Browser(format!(
                    "sandbox `{}` cannot run a browser: set [plugins.browser] backend = \"none\", \
                     or cdp_url to a browser isolated on its own",
                    chosen.name
                )));
            }
        };
    }
    Ok(Some(Arc::new(Backend::new(config))))
}
