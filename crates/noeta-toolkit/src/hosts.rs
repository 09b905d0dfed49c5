//! The names a local HTTP server answers to: the `Host` and `Origin` checks that keep a web page
//! the user visits (DNS rebinding, cross-site requests) out of `noeta serve` and the app preview
//! gateway (`noeta mcp serve --http` applies the same rule through its MCP library's settings).
//!
//! A request's `Host` must be a loopback name or address (`localhost`, `127.0.0.0/8`, `[::1]`)
//! with the server's own port, or one of the names a setting lists (`name` for any port,
//! `name:port` for one). A browser's `Origin`, when a request carries one, must be the origin
//! of the server itself: its authority the request's `Host`, over `http` or `https`.

use std::net::IpAddr;

/// Why a request is refused, as an HTTP status and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 421 for a `Host` this server does not answer to, 403 for a foreign `Origin`.
    pub status: u16,
    /// What is wrong, naming the value.
    pub reason: String,
}

/// One entry of an allow-list of host names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    name: String,
    port: Option<u16>,
}

/// The `Host` names one server answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCheck {
    port: u16,
    allowed: Vec<Allowed>,
}

/// A `Host` (or an origin's authority) split into its lower-cased name and its port.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() || text.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let (name, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (format!("[{inside}]"), port)
    } else {
        match text.rsplit_once(':') {
            Some((name, port)) => (name.to_owned(), Some(port)),
            None => (text.to_owned(), None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    if name.is_empty() {
        return None;
    }
    Some((name.to_ascii_lowercase(), port))
}

/// Whether `name` (lower-case, an IPv6 address in brackets) is a loopback name or address.
pub fn is_loopback_name(name: &str) -> bool {
    if name == "localhost" {
        return true;
    }
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl HostCheck {
    /// Loopback names and addresses with `port`, and nothing else.
    pub fn loopback(port: u16) -> Self {
        Self {
            port,
            allowed: Vec::new(),
        }
    }

    /// Also the names `hosts` lists: `name` for any port, `name:port` for that port only.
    ///
    /// # Errors
    /// An entry that is not a host name with an optional port, naming it.
    pub fn with_allowed(mut self, hosts: &[String]) -> Result<Self, String> {
        for host in hosts {
            let (name, port) = authority(host)
                .ok_or_else(|| format!("`{host}` is not a host name with an optional port"))?;
            self.allowed.push(Allowed { name, port });
        }
        Ok(self)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether a request with this `Host` header is for this server.
    ///
    /// # Errors
    /// A missing `Host`, or one that names another server (421).
    pub fn check_host(&self, host: Option<&str>) -> Result<(), Refusal> {
        let refuse = |reason: String| Refusal {
            status: 421,
            reason,
        };
        let Some(host) = host else {
            return Err(refuse(
                "the request has no `Host` header: this server answers only to its own address"
                    .to_owned(),
            ));
        };
        let Some((name, port)) = authority(host) else {
            return Err(refuse(format!("the `Host` header `{host}` is not a host")));
        };
        if self.answers(&name, port) {
            Ok(())
        } else {
            Err(refuse(format!(
                "this server does not answer to the `Host` `{host}` (only to a loopback address \
                 with port {} or a name its settings allow)",
                self.port
            )))
        }
    }

    fn answers(&self, name: &str, port: Option<u16>) -> bool {
        (is_loopback_name(name) && port == Some(self.port))
            || self
                .allowed
                .iter()
                .any(|a| a.name == name && (a.port.is_none() || a.port == port))
    }

    /// Whether a request whose `Host` passed [`HostCheck::check_host`] may come from `origin`:
    /// none (not a browser, or a same-origin `GET`), or this very server's origin.
    ///
    /// # Errors
    /// Any other origin, `null` included (403).
    pub fn check_origin(&self, origin: Option<&str>, host: &str) -> Result<(), Refusal> {
        let Some(origin) = origin else {
            return Ok(());
        };
        let refuse = || Refusal {
            status: 403,
            reason: format!(
                "a request from origin `{origin}` is refused: only this server's own page may send one"
            ),
        };
        let (scheme, rest) = origin.split_once("://").ok_or_else(refuse)?;
        let default = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(refuse()),
        };
        let (origin_name, origin_port) = authority(rest).ok_or_else(refuse)?;
        let (host_name, host_port) = authority(host).ok_or_else(refuse)?;
        let same = origin_name == host_name
            && origin_port.unwrap_or(default) == host_port.unwrap_or(default);
        if same && self.answers(&host_name, host_port) {
            Ok(())
        } else {
            Err(refuse())
        }
    }
}

/// Whether an `Authorization` header's value is `Bearer <token>`, compared without stopping at
/// the first difference.
pub fn bearer_matches(authorization: Option<&str>, token: &str) -> bool {
    let given = authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or_default();
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// `bytes` random bytes from the system, as hex: a token, or an address nobody can guess.
///
/// # Errors
/// When the system gives no random bytes.
pub fn random_hex(bytes: usize) -> Result<String, String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|err| format!("no random bytes: {err}"))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_the_servers_port_are_answered() {
        let check = HostCheck::loopback(7878);
        for host in [
            "127.0.0.1:7878",
            "localhost:7878",
            "LOCALHOST:7878",
            "[::1]:7878",
            "127.1.2.3:7878",
        ] {
            assert_eq!(check.check_host(Some(host)), Ok(()), "{host}");
        }
        for host in [
            "evil.example:7878",
            "127.0.0.1:7879",
            "127.0.0.1",
            "localhost",
            "10.0.0.1:7878",
            "[::2]:7878",
            "127.0.0.1:7878@evil",
            "",
            "localhost.evil.example:7878",
        ] {
            let refusal = check.check_host(Some(host)).unwrap_err();
            assert_eq!(refusal.status, 421, "{host}");
        }
        assert!(
            check
                .check_host(None)
                .unwrap_err()
                .reason
                .contains("no `Host`")
        );
    }

    #[test]
    fn allowed_names_answer_on_any_port_or_the_one_given() {
        let check = HostCheck::loopback(7878)
            .with_allowed(&["noeta.example".to_owned(), "box:8443".to_owned()])
            .unwrap();
        assert_eq!(check.check_host(Some("noeta.example")), Ok(()));
        assert_eq!(check.check_host(Some("Noeta.Example:443")), Ok(()));
        assert_eq!(check.check_host(Some("box:8443")), Ok(()));
        assert!(check.check_host(Some("box:8444")).is_err());
        assert!(
            HostCheck::loopback(1)
                .with_allowed(&["a/b".to_owned()])
                .unwrap_err()
                .contains("`a/b` is not a host name")
        );
    }

    #[test]
    fn a_bearer_token_matches_only_itself_and_random_hex_differs_each_time() {
        assert!(bearer_matches(Some("Bearer abc"), "abc"));
        assert!(bearer_matches(Some("Bearer  abc "), "abc"));
        for wrong in [
            None,
            Some("abc"),
            Some("Bearer abd"),
            Some("Bearer ab"),
            Some("bearer abc"),
        ] {
            assert!(!bearer_matches(wrong, "abc"), "{wrong:?}");
        }
        let one = random_hex(16).unwrap();
        assert_eq!(one.len(), 32);
        assert_ne!(one, random_hex(16).unwrap());
    }

    #[test]
    fn only_the_servers_own_origin_is_accepted() {
        let check = HostCheck::loopback(7878)
            .with_allowed(&["noeta.example".to_owned()])
            .unwrap();
        let host = "127.0.0.1:7878";
        assert_eq!(check.check_origin(None, host), Ok(()));
        assert_eq!(
            check.check_origin(Some("http://127.0.0.1:7878"), host),
            Ok(())
        );
        assert_eq!(
            check.check_origin(Some("https://noeta.example"), "noeta.example"),
            Ok(())
        );
        for origin in [
            "http://evil.example",
            "http://localhost:7878",
            "http://127.0.0.1:7879",
            "null",
            "file://",
            "chrome-extension://abc",
        ] {
            let refusal = check.check_origin(Some(origin), host).unwrap_err();
            assert_eq!(refusal.status, 403, "{origin}");
            assert!(refusal.reason.contains(origin), "{refusal:?}");
        }
    }
}
