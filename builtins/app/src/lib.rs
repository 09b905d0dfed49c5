//! The `app` built-in plugin: app previews. Its session pack (band 1000) offers `open_app`,
//! which mounts a web app of the workspace on the host's preview gateway (`gateway.rs`) and
//! returns its URL: the app's files are served from its directory, every other path is
//! proxied to the app's own server. The pack is present only when the host hands it a
//! gateway (the host value [`GATEWAY`]); each mount is recorded, so a resumed task mounts its
//! apps again on the gateway of the process that carries it on.

mod gateway;
mod paths;
mod proxy;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::{
    HostValue, LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext,
    SessionPackFactory, Tool, ToolContext, ToolError, ToolOutput,
};
use serde_json::{Value, json};

pub use gateway::Gateway;
pub use proxy::ProxyRule;

/// The plugin's name, and the extension whose records hold the mounts.
pub const PLUGIN: &str = "app";

/// The host value under which a host hands the plugin its gateway (an `Arc<Gateway>`).
pub const GATEWAY: &str = "app_preview";

/// `gateway` as the host value the plugin reads (set it under [`GATEWAY`]).
pub fn host_value(gateway: Arc<Gateway>) -> HostValue {
    HostValue::new(gateway)
}

struct Pack;

/// `[plugins.app]`: `proxy_hosts`, the hosts besides loopback an app's server may be on.
fn proxy_rule(config: &Value) -> Result<ProxyRule, String> {
    let table = noeta_toolkit::SettingsTable::new(PLUGIN, config, &["proxy_hosts"])
        .map_err(|e| e.to_string())?;
    let hosts = table
        .strings("proxy_hosts")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    Ok(ProxyRule::new(&hosts))
}

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let mut pack = PackContribution::empty();
        let rule = Arc::new(proxy_rule(ctx.config(PLUGIN))?);
        // No gateway, no previews: the tool is not offered.
        let Some(gateway) = ctx.host_values.get::<Arc<Gateway>>(GATEWAY) else {
            return Ok(pack);
        };
        pack.tools.push(Arc::new(OpenApp {
            gateway: Arc::clone(gateway),
            rule: Arc::clone(&rule),
        }));
        pack.extensions.push(Arc::new(Mounts {
            gateway: Arc::clone(gateway),
            rule,
        }));
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_app::app", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}

/// `open_app{dir, proxy_to}`.
struct OpenApp {
    gateway: Arc<Gateway>,
    rule: Arc<ProxyRule>,
}

/// An app's name in its URL: its directory's name, in the characters a path segment keeps.
fn app_name(dir: &str) -> String {
    let last = Path::new(dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if name.trim_matches('-').is_empty() {
        "app".to_owned()
    } else {
        name
    }
}

/// `dir` inside `workspace`, as a real directory holding `index.html`; `Err` tells the model why
/// not. Never the workspace itself, a directory holding `.noeta` or `.git` (a project's root),
/// or one under a dot-directory: what the gateway serves must not include the task store, the
/// settings or the repository.
fn app_dir(workspace: &Path, dir: &str) -> Result<PathBuf, String> {
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    if Path::new(dir)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!("`dir` `{dir}` must stay inside the workspace"));
    }
    let joined = root.join(dir);
    let real = std::fs::canonicalize(&joined)
        .map_err(|_| format!("`dir` `{dir}` is not a directory of the workspace"))?;
    let Ok(inside) = real.strip_prefix(&root) else {
        return Err(format!("`dir` `{dir}` must stay inside the workspace"));
    };
    if inside.as_os_str().is_empty() {
        return Err(format!(
            "`dir` `{dir}` is the workspace itself: give the app's own directory (the one with its index.html)"
        ));
    }
    if inside
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    {
        return Err(format!(
            "`dir` `{dir}` is inside a dot-directory, which is never served"
        ));
    }
    if !real.is_dir() {
        return Err(format!("`dir` `{dir}` is not a directory"));
    }
    for kept in [".noeta", ".git"] {
        if real.join(kept).exists() {
            return Err(format!(
                "`dir` `{dir}` holds `{kept}`: a project's root is never served; give the app's own directory"
            ));
        }
    }
    if !real.join("index.html").is_file() {
        return Err(format!("`dir` `{dir}` has no `index.html`"));
    }
    Ok(real)
}

/// `proxy_to` when it is an http(s) URL with a host, without credentials, whose every address
/// `rule` allows.
async fn proxy_target(proxy_to: &str, rule: &ProxyRule) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(proxy_to)
        .map_err(|err| format!("`proxy_to` `{proxy_to}` is not a URL: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "`proxy_to` `{proxy_to}` must be an http:// or https:// URL with a host"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("`proxy_to` `{proxy_to}` may not carry credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`proxy_to` `{proxy_to}` may not have a query or a fragment"
        ));
    }
    rule.check(&url)
        .await
        .map_err(|why| format!("`proxy_to` `{proxy_to}`: {why}"))?;
    Ok(url)
}

#[async_trait]
impl Tool for OpenApp {
    fn name(&self) -> &str {
        "open_app"
    }

    fn description(&self) -> &str {
        "Opens a web app of the workspace in a local preview and returns its URL. `dir` is a \
         workspace directory with an `index.html` (its files are served as they are); every \
         other path is passed to the app's own server at `proxy_to` (an http:// or https:// \
         URL), so the page and its API answer from one address."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "dir": { "type": "string", "description": "The app's directory in the workspace (it holds index.html)" },
                "proxy_to": { "type": "string", "description": "The app's server, for every path that is not a file of `dir`" }
            },
            "required": ["dir", "proxy_to"],
            "additionalProperties": false
        })
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = |key: &str| {
            input
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    ToolError::RespondToModel(format!("open_app: `{key}` (a string) is required"))
                })
        };
        let (dir, proxy_to) = (text("dir")?, text("proxy_to")?);
        let workspace = ctx
            .exec_env()
            .map(|env| env.workspace().to_path_buf())
            .ok_or_else(|| ToolError::Fatal("open_app: this host has no workspace".to_owned()))?;
        let real = app_dir(&workspace, &dir)
            .map_err(|why| ToolError::RespondToModel(format!("open_app: {why}")))?;
        let target = proxy_target(&proxy_to, &self.rule)
            .await
            .map_err(|why| ToolError::RespondToModel(format!("open_app: {why}")))?;
        let app = app_name(&dir);
        let (url, _) = self
            .gateway
            .mount(ctx.task_id(), &app, &real, target, Arc::clone(&self.rule))
            .map_err(|why| ToolError::RespondToModel(format!("open_app: {why}")))?;
        ctx.record(
            PLUGIN,
            "mounted",
            json!({ "app": app, "dir": dir, "proxy_to": proxy_to }),
        );
        Ok(ToolOutput::text(format!(
            "{url}\nThe app `{dir}` is open at that address: its files are served from `{dir}`, \
             every other path goes to {proxy_to}."
        )))
    }
}

/// Folds the mounts a task made, and mounts them again on every claim (a resumed task, in a
/// new process, finds its apps at new URLs on this process's gateway).
struct Mounts {
    gateway: Arc<Gateway>,
    rule: Arc<ProxyRule>,
}

#[async_trait]
impl Extension for Mounts {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if kind != "mounted" {
            return Ok(());
        }
        let app = data
            .get("app")
            .and_then(Value::as_str)
            .ok_or("a `mounted` record without `app`")?;
        if !state.is_object() {
            *state = json!({});
        }
        state[app] = json!({ "dir": data.get("dir"), "proxy_to": data.get("proxy_to") });
        Ok(())
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        let (Some(mounts), Some(workspace)) = (
            view.ext_state(PLUGIN).and_then(Value::as_object),
            view.workspace(),
        ) else {
            return Ok(());
        };
        for (app, mount) in mounts {
            let (Some(dir), Some(proxy_to)) = (
                mount.get("dir").and_then(Value::as_str),
                mount.get("proxy_to").and_then(Value::as_str),
            ) else {
                continue;
            };
            // A directory gone since is left unmounted; the model can open it again.
            if let Ok(real) = app_dir(workspace, dir) {
                let mounted = match proxy_target(proxy_to, &self.rule).await {
                    Ok(target) => self.gateway.mount(
                        view.task_id().as_str(),
                        app,
                        &real,
                        target,
                        Arc::clone(&self.rule),
                    ),
                    Err(why) => Err(why),
                };
                let text = match mounted {
                    // Another process carries the task on: its apps have a new address.
                    Ok((url, true)) => format!("app `{app}` is open again at {url}"),
                    Ok((_, false)) => continue,
                    Err(why) => format!("app `{app}` cannot be opened again: {why}"),
                };
                view.record(PLUGIN, "notice", json!({ "text": text }));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apps_name_is_its_directorys_in_url_characters() {
        assert_eq!(app_name("web/My Site"), "my-site");
        assert_eq!(app_name("."), "app");
        assert_eq!(app_name("todo_app"), "todo_app");
    }

    #[tokio::test]
    async fn proxy_to_must_be_http_with_a_host_on_loopback_unless_listed() {
        let rule = ProxyRule::default();
        assert!(proxy_target("http://127.0.0.1:8080", &rule).await.is_ok());
        assert!(
            proxy_target("http://localhost:8080/api", &rule)
                .await
                .is_ok()
        );
        let err = proxy_target("http://169.254.169.254/", &rule)
            .await
            .unwrap_err();
        assert!(err.contains("a link-local address"), "{err}");
        assert!(
            proxy_target("file:///etc", &rule)
                .await
                .unwrap_err()
                .contains("must be an http:// or https://")
        );
        assert!(
            proxy_target("not a url", &rule)
                .await
                .unwrap_err()
                .contains("is not a URL")
        );
        assert!(
            proxy_target("http://u:p@127.0.0.1:1", &rule)
                .await
                .unwrap_err()
                .contains("credentials")
        );
        let listed = proxy_rule(&json!({ "proxy_hosts": ["192.168.1.5"] })).unwrap();
        assert!(
            proxy_target("http://192.168.1.5:3000", &listed)
                .await
                .is_ok()
        );
        let err = proxy_rule(&json!({ "proxy_host": [] })).unwrap_err();
        assert!(err.contains("proxy_host"), "{err}");
    }

    #[test]
    fn dir_must_be_a_workspace_directory_with_an_index() {
        let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(workspace.path().join("site")).unwrap_or_default();
        std::fs::create_dir_all(workspace.path().join("empty")).unwrap_or_default();
        std::fs::write(workspace.path().join("site/index.html"), "<p>hi</p>").unwrap_or_default();
        assert!(app_dir(workspace.path(), "site").is_ok());
        assert!(
            app_dir(workspace.path(), "empty")
                .unwrap_err()
                .contains("has no `index.html`")
        );
        assert!(
            app_dir(workspace.path(), "../x")
                .unwrap_err()
                .contains("inside the workspace")
        );
        assert!(
            app_dir(workspace.path(), "missing")
                .unwrap_err()
                .contains("is not a directory")
        );
        // The workspace itself, a project's root, a dot-directory: never served.
        std::fs::write(workspace.path().join("index.html"), "<p>root</p>").unwrap_or_default();
        for root in [".", "", "site/.."] {
            let err = app_dir(workspace.path(), root).unwrap_err();
            assert!(
                err.contains("is the workspace itself") || err.contains("inside the workspace"),
                "{root}: {err}"
            );
        }
        std::fs::create_dir_all(workspace.path().join("sub/.git")).unwrap_or_default();
        std::fs::write(workspace.path().join("sub/index.html"), "<p>sub</p>").unwrap_or_default();
        assert!(
            app_dir(workspace.path(), "sub")
                .unwrap_err()
                .contains("holds `.git`")
        );
        std::fs::create_dir_all(workspace.path().join(".noeta/web")).unwrap_or_default();
        std::fs::write(workspace.path().join(".noeta/web/index.html"), "x").unwrap_or_default();
        assert!(
            app_dir(workspace.path(), ".noeta/web")
                .unwrap_err()
                .contains("dot-directory")
        );
    }
}
