//! Where an app's `proxy_to` may point, and the proxy itself.
//!
//! A target is loopback-only — `localhost`, `127.0.0.0/8`, `::1` — unless `[plugins.app]
//! proxy_hosts` lists its host (a name or an address). The rule is applied to the addresses the
//! host resolves to, when `open_app` is called and again for every connection the proxy makes
//! (its resolver drops any address the rule refuses, so a name that later resolves elsewhere
//! reaches nothing). The proxy follows no redirect and uses no system proxy.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use reqwest::Url;

use crate::gateway::plain;

/// Which hosts a `proxy_to` may name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyRule {
    /// `[plugins.app] proxy_hosts`, lower-case.
    hosts: Vec<String>,
}

impl ProxyRule {
    /// Loopback plus `hosts` (names or addresses).
    pub fn new(hosts: &[String]) -> Self {
        Self {
            hosts: hosts
                .iter()
                .map(|h| h.trim().trim_matches(['[', ']']).to_ascii_lowercase())
                .collect(),
        }
    }

    fn listed(&self, host: &str) -> bool {
        let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    /// Whether the proxy may connect to `ip`, reached through `host`.
    fn allows(&self, host: &str, ip: IpAddr) -> bool {
        ip.is_loopback() || self.listed(host) || self.listed(&ip.to_string())
    }

    fn refusal(host: &str, ip: IpAddr) -> String {
        let what = match ip {
            IpAddr::V4(v4) if v4.is_link_local() => "a link-local address",
            IpAddr::V6(v6) if v6.is_unicast_link_local() => "a link-local address",
            IpAddr::V4(v4) if v4.is_private() => "a private address",
            IpAddr::V6(v6) if v6.is_unique_local() => "a private address",
            _ => "not a loopback address",
        };
        format!(
            "`{host}` is {what} ({ip}): an app's server must be on this machine's loopback \
             unless [plugins.app] proxy_hosts lists its host"
        )
    }

    /// The addresses `url`'s host may be reached at, every one of them allowed.
    ///
    /// # Errors
    /// A host that resolves to nothing, or to any address the rule refuses.
    pub(crate) async fn check(&self, url: &Url) -> Result<Vec<SocketAddr>, String> {
        let host = url.host_str().ok_or("the URL names no host")?.to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|err| format!("`{host}` cannot be resolved: {err}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("`{host}` resolves to no address"));
        }
        match addrs.iter().find(|a| !self.allows(&host, a.ip())) {
            Some(refused) => Err(Self::refusal(&host, refused.ip())),
            None => Ok(addrs),
        }
    }
}

/// The proxy's resolver: the system's, with every address the rule refuses dropped.
struct Resolver(Arc<ProxyRule>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rule = Arc::clone(&self.0);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let kept: Vec<SocketAddr> = found.filter(|a| rule.allows(&host, a.ip())).collect();
            if kept.is_empty() {
                return Err(
                    format!("`{host}` resolves to no address an app's server may have").into(),
                );
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The clients of the proxied requests, one per rule (its resolver applies that rule), each
/// made when first needed: building one loads the system's root certificates, which most runs
/// never need.
#[derive(Default)]
pub(crate) struct Proxy {
    clients: std::sync::Mutex<Vec<(ProxyRule, reqwest::Client)>>,
}

impl Proxy {
    fn client(&self, rule: &Arc<ProxyRule>) -> Result<reqwest::Client, String> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, client)) = clients.iter().find(|(r, _)| r == rule.as_ref()) {
            return Ok(client.clone());
        }
        // TLS for `https://` targets uses ring, like every other client of this process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(Resolver(Arc::clone(rule))))
            .build()
            .map_err(|err| format!("the proxy's client cannot be built: {err}"))?;
        clients.push((rule.as_ref().clone(), client.clone()));
        Ok(client)
    }
}

/// The most bytes of a body the proxy passes on, either way.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;

/// Hop-by-hop headers, and the ones the proxy sets itself: never forwarded.
const HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Passes `request` on to `base` + `/` + `rest` (the path as sent, already checked) and its
/// answer back.
pub(crate) async fn forward(
    request: Request<Incoming>,
    base: &Url,
    rest: &str,
    rule: &Arc<ProxyRule>,
    proxy: &Proxy,
) -> Response<Full<Bytes>> {
    let client = match proxy.client(rule) {
        Ok(client) => client,
        Err(why) => return plain(StatusCode::BAD_GATEWAY, why),
    };
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let target = format!("{}/{rest}{query}", base.as_str().trim_end_matches('/'));
    // An address in the URL is never resolved: the rule is applied to it here.
    if let Some(host) = base.host_str()
        && let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>()
        && !rule.allows(host, ip)
    {
        return plain(StatusCode::BAD_GATEWAY, ProxyRule::refusal(host, ip));
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes())
    else {
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request's body could not be read, or is over {MAX_BODY} bytes"),
        );
    };
    let Ok(method) = reqwest::Method::from_bytes(parts.method.as_str().as_bytes()) else {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "unsupported method");
    };
    let mut outgoing = client.request(method, &target).body(body);
    for (name, value) in &parts.headers {
        if !HOP.contains(&name.as_str()) {
            outgoing = outgoing.header(name.as_str(), value.as_bytes());
        }
    }
    let reply = match outgoing.send().await {
        Ok(reply) => reply,
        Err(err) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!("the app's server at {base} did not answer: {err}"),
            );
        }
    };
    let status = StatusCode::from_u16(reply.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers: Vec<(String, Vec<u8>)> = reply
        .headers()
        .iter()
        .filter(|(name, _)| !HOP.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    let mut reply = reply;
    let mut bytes = Vec::new();
    loop {
        match reply.chunk().await {
            Ok(Some(chunk)) if bytes.len() + chunk.len() <= MAX_BODY => {
                bytes.extend_from_slice(&chunk);
            }
            Ok(Some(_)) => {
                return plain(
                    StatusCode::BAD_GATEWAY,
                    format!("the app's server answered with more than {MAX_BODY} bytes"),
                );
            }
            Ok(None) | Err(_) => break,
        }
    }
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_bytes(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[tokio::test]
    async fn loopback_targets_pass_and_others_only_when_listed() {
        let rule = ProxyRule::default();
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:3000/api",
            "http://[::1]:9",
        ] {
            assert!(rule.check(&url(ok)).await.is_ok(), "{ok}");
        }
        for (refused, says) in [
            (
                "http://169.254.169.254/latest/meta-data",
                "a link-local address",
            ),
            ("http://10.0.0.1:80", "a private address"),
            ("http://192.168.1.1", "a private address"),
            ("http://8.8.8.8", "not a loopback address"),
            ("http://[fe80::1]", "a link-local address"),
        ] {
            let err = rule.check(&url(refused)).await.unwrap_err();
            assert!(err.contains(says), "{refused}: {err}");
            assert!(err.contains("proxy_hosts"), "{err}");
        }
        let listed = ProxyRule::new(&["10.0.0.1".to_owned()]);
        assert!(listed.check(&url("http://10.0.0.1:80")).await.is_ok());
        assert!(listed.check(&url("http://10.0.0.2:80")).await.is_err());
    }
}
