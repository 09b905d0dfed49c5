//! `[plugins.browser]`: which browser the backend drives, and where it may go.
//!
//! ```toml
//! [plugins.browser]
//! backend = "chromium"        # or "none"; unset: chromium when one is installed
//! executable = "/usr/bin/chromium"
//! cdp_url = "http://127.0.0.1:9222"   # attach to a running browser instead of starting one
//! allowed_hosts = ["127.0.0.1", "*.example.org"]   # unset: any host
//! width = 1280
//! height = 800
//! timeout_ms = 30000
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use noeta_toolkit::{SettingsTable, TimeUnit};
use serde_json::Value;

/// `[plugins.browser]` keys.
const KEYS: &[&str] = &[
    "backend",
    "executable",
    "cdp_url",
    "allowed_hosts",
    "width",
    "height",
    "timeout_ms",
];

/// The programs a local backend looks for on `PATH`, in this order.
const PROGRAMS: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// How the backend gets a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Starts this program, one per task.
    Local {
        /// The browser's program.
        executable: PathBuf,
    },
    /// Attaches to a running browser's DevTools endpoint (`ws://…` or `http://host:port`).
    Attach {
        /// The endpoint.
        url: String,
    },
}

/// The backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// How it gets a browser.
    pub launch: Launch,
    /// Where each task's profile directory is made.
    pub profiles: PathBuf,
    /// The hosts pages may be opened on (`*.` prefixes match subdomains); empty: any.
    pub allowed_hosts: Vec<String>,
    /// The viewport's width, in CSS pixels.
    pub width: u32,
    /// The viewport's height, in CSS pixels.
    pub height: u32,
    /// How long a page may take to load, and a DevTools call to answer.
    pub timeout: Duration,
    /// The command line a started browser runs under (the host's sandbox puts it there);
    /// empty: none.
    pub wrapper: Vec<String>,
}

impl Config {
    /// Reads `[plugins.browser]` (`params`, `null` when absent); `profiles` is where task
    /// profiles go. `Ok(None)`: no browser (`backend = "none"`, or none installed and none
    /// configured). A setting it cannot use is an error naming the key.
    pub fn parse(params: &Value, profiles: &Path) -> Result<Option<Self>, String> {
        let table = SettingsTable::new("browser", params, KEYS).map_err(|e| e.to_string())?;
        let err = |e: noeta_toolkit::SettingsError| e.to_string();
        let backend = table.string("backend").map_err(err)?;
        let executable = table.string("executable").map_err(err)?;
        let cdp_url = table.string("cdp_url").map_err(err)?;
        let launch = match backend.as_deref() {
            Some("none") => return Ok(None),
            None | Some("chromium") => {
                if let Some(url) = cdp_url {
                    if !["ws://", "wss://", "http://", "https://"]
                        .iter()
                        .any(|s| url.starts_with(s))
                    {
                        return Err(format!(
                            "[plugins.browser] cdp_url: `{url}` must be a ws:// or http:// \
                             DevTools address"
                        ));
                    }
                    Launch::Attach { url }
                } else if let Some(path) = executable {
                    let path = PathBuf::from(path);
                    if !path.is_file() {
                        return Err(format!(
                            "[plugins.browser] executable: `{}` does not exist",
                            path.display()
                        ));
                    }
                    Launch::Local { executable: path }
                } else {
                    match find_browser() {
                        Some(executable) => Launch::Local { executable },
                        // Asked for by name: say what is missing.
                        None if backend.is_some() => {
                            return Err("[plugins.browser] backend = \"chromium\": no chromium, \
                                 chromium-browser or google-chrome on PATH (apt-get install \
                                 chromium, or set [plugins.browser] executable)"
                                .to_owned());
                        }
                        None => return Ok(None),
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "[plugins.browser] backend: `{other}` is not a browser backend (known: \
                     chromium, none)"
                ));
            }
        };
        let allowed_hosts = table
            .strings("allowed_hosts")
            .map_err(err)?
            .unwrap_or_default();
        for host in &allowed_hosts {
            let bare = host.strip_prefix("*.").unwrap_or(host);
            if bare.is_empty() || bare.contains(['/', ':', '*', ' ']) {
                return Err(format!(
                    "[plugins.browser] allowed_hosts: `{host}` is not a host name (write \
                     `example.org` or `*.example.org`)"
                ));
            }
        }
        let size = |key: &str, default: u32| -> Result<u32, String> {
            match table.whole::<u32>(key).map_err(err)? {
                Some(n) if !(100..=8000).contains(&n) => Err(format!(
                    "[plugins.browser] {key}: {n} is outside 100..8000 pixels"
                )),
                Some(n) => Ok(n),
                None => Ok(default),
            }
        };
        Ok(Some(Self {
            launch,
            profiles: profiles.to_path_buf(),
            allowed_hosts: allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            width: size("width", 1280)?,
            height: size("height", 800)?,
            timeout: table
                .positive_duration("timeout_ms", TimeUnit::Milliseconds)
                .map_err(err)?
                .unwrap_or(Duration::from_secs(30)),
            wrapper: Vec::new(),
        }))
    }

    /// Whether a page may be opened at `url`; `Err` says why not, in words for the model.
    pub fn allows(&self, url: &str) -> Result<(), String> {
        if url == "about:blank" {
            return Ok(());
        }
        let parsed = url::Url::parse(url).map_err(|err| format!("`{url}` is not a URL: {err}"))?;
        match parsed.scheme() {
            "http" | "https" => {}
            "file" => {
                return Err(format!(
                    "`{url}`: file: URLs are refused — the browser opens web pages only (read \
                     files with the file tools)"
                ));
            }
            other => {
                return Err(format!(
                    "`{url}`: {other}: URLs are refused — only http:// and https:// pages open"
                ));
            }
        }
        let host = parsed
            .host_str()
            .map(|h| {
                h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        if self.allowed_hosts.is_empty()
            || self.allowed_hosts.iter().any(|a| host_matches(a, &host))
        {
            Ok(())
        } else {
            Err(format!(
                "`{url}`: the host `{host}` is not on the browser's allow-list \
                 ([plugins.browser] allowed_hosts: {})",
                self.allowed_hosts.join(", ")
            ))
        }
    }
}

/// Whether `host` is `allowed` (`*.example.org` also matches `example.org`'s subdomains).
fn host_matches(allowed: &str, host: &str) -> bool {
    match allowed.strip_prefix("*.") {
        Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
        None => host == allowed,
    }
}

/// The first of [`PROGRAMS`] on `PATH`.
fn find_browser() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    PROGRAMS.iter().find_map(|program| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attached(params: Value) -> Result<Option<Config>, String> {
        let mut params = params;
        params["cdp_url"] = json!("http://127.0.0.1:9222");
        Config::parse(&params, Path::new("/profiles"))
    }

    #[test]
    fn none_turns_it_off_and_an_unknown_backend_is_named() {
        assert_eq!(
            Config::parse(&json!({ "backend": "none" }), Path::new("/p")),
            Ok(None)
        );
        let err = Config::parse(&json!({ "backend": "firefox" }), Path::new("/p")).unwrap_err();
        assert!(err.contains("`firefox` is not a browser backend"), "{err}");
        let err = Config::parse(&json!({ "backend": 3 }), Path::new("/p")).unwrap_err();
        assert!(err.contains("backend"), "{err}");
        let err = Config::parse(
            &json!({ "executable": "/no/such/chromium" }),
            Path::new("/p"),
        )
        .unwrap_err();
        assert!(
            err.contains("executable: `/no/such/chromium` does not exist"),
            "{err}"
        );
        let err =
            Config::parse(&json!({ "cdp_url": "localhost:9222" }), Path::new("/p")).unwrap_err();
        assert!(err.contains("cdp_url"), "{err}");
    }

    #[test]
    fn the_allow_list_refuses_other_hosts_and_every_file_url() {
        let open = attached(json!({})).ok().flatten();
        let open = open.as_ref().map(|c| c.allows("http://anything.test/x"));
        assert_eq!(open, Some(Ok(())));
        let Ok(Some(config)) = attached(json!({ "allowed_hosts": ["127.0.0.1", "*.example.org"] }))
        else {
            panic!("the settings are valid");
        };
        assert!(config.allows("http://127.0.0.1:8080/").is_ok());
        assert!(config.allows("https://docs.example.org/a").is_ok());
        assert!(config.allows("https://example.org/").is_ok());
        assert!(config.allows("about:blank").is_ok());
        let other = config.allows("https://evil.test/").unwrap_err();
        assert!(
            other.contains("`evil.test` is not on the browser's allow-list"),
            "{other}"
        );
        let file = config.allows("file:///etc/passwd").unwrap_err();
        assert!(file.contains("file: URLs are refused"), "{file}");
        let js = config.allows("javascript:alert(1)").unwrap_err();
        assert!(js.contains("javascript: URLs are refused"), "{js}");
        let bad = attached(json!({ "allowed_hosts": ["http://x.org/"] })).unwrap_err();
        assert!(
            bad.contains("allowed_hosts: `http://x.org/` is not a host name"),
            "{bad}"
        );
        let small = attached(json!({ "width": 10 })).unwrap_err();
        assert!(small.contains("width: 10 is outside"), "{small}");
    }
}
