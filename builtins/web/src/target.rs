//! Which URLs WebFetch reads: http or https only, http upgraded to https except on loopback
//! hosts, and redirects followed only within one host.

use std::net::IpAddr;

use reqwest::Url;

/// The longest URL accepted, in bytes.
pub(crate) const MAX_URL_LEN: usize = 2000;

/// The URL a call asks for, checked and upgraded: `http` becomes `https` unless the host is a
/// loopback host (`localhost`, 127.0.0.0/8, `::1`), where nothing listens for TLS.
pub(crate) fn prepare(text: &str) -> Result<Url, String> {
    let text = text.trim();
    if text.len() > MAX_URL_LEN {
        return Err(format!(
            "the URL is {} bytes long; at most {MAX_URL_LEN} are accepted",
            text.len()
        ));
    }
    let url = Url::parse(text).map_err(|err| format!("`{text}` is not a valid URL: {err}"))?;
    upgrade(url)
}

/// Checks a URL (the one asked for, or a redirect's target) and upgrades it to https unless it
/// is on a loopback host.
pub(crate) fn upgrade(mut url: Url) -> Result<Url, String> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "`{url}` uses `{other}:`; only http and https URLs can be fetched"
            ));
        }
    }
    if url.host().is_none() {
        return Err(format!("`{url}` names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "`{}` carries credentials; URLs with a user name or password are not fetched",
            redacted(&url)
        ));
    }
    url.set_fragment(None);
    if url.scheme() == "http" && !is_loopback(&url) {
        // http and https share everything but the scheme and the default port.
        let port = url.port();
        if url.set_scheme("https").is_err() {
            return Err(format!("`{url}` cannot be upgraded to https"));
        }
        if port == Some(80) {
            let _ = url.set_port(None);
        }
    }
    Ok(url)
}

/// Whether the URL's host is this machine's loopback: `localhost` (or a name under it),
/// 127.0.0.0/8 or `::1`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    // IPv6 hosts come bracketed.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let name = bare.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// Whether a redirect from `from` to `to` stays on one host (the port and the scheme may
/// change; the host name is compared without case).
pub(crate) fn same_host(from: &Url, to: &Url) -> bool {
    match (from.host_str(), to.host_str()) {
        (Some(a), Some(b)) => a
            .trim_end_matches('.')
            .eq_ignore_ascii_case(b.trim_end_matches('.')),
        _ => false,
    }
}

/// The URL without its user name and password, for messages.
fn redacted(url: &Url) -> Url {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(text: &str) -> String {
        prepare(text).unwrap().to_string()
    }

    #[test]
    fn http_becomes_https_except_on_loopback_hosts() {
        assert_eq!(
            prepared("http://example.com/a?b=1"),
            "https://example.com/a?b=1"
        );
        assert_eq!(prepared("http://example.com:80/"), "https://example.com/");
        assert_eq!(
            prepared("http://example.com:8080/x"),
            "https://example.com:8080/x"
        );
        assert_eq!(prepared("http://10.1.2.3/"), "https://10.1.2.3/");
        assert_eq!(prepared("https://example.com/"), "https://example.com/");
        for loopback in [
            "http://localhost:8080/x",
            "http://LOCALHOST/",
            "http://app.localhost/",
            "http://127.0.0.1:3000/",
            "http://127.10.20.30/",
            "http://[::1]:9000/",
        ] {
            assert_eq!(
                prepare(loopback).unwrap().scheme(),
                "http",
                "{loopback} stays http"
            );
        }
        // Only 127.0.0.0/8 is loopback.
        assert_eq!(prepared("http://128.0.0.1/"), "https://128.0.0.1/");
        assert_eq!(
            prepared("http://localhost.example.com/"),
            "https://localhost.example.com/"
        );
    }

    #[test]
    fn the_fragment_is_dropped() {
        assert_eq!(
            prepared("https://example.com/a#part"),
            "https://example.com/a"
        );
    }

    #[test]
    fn other_schemes_credentials_and_long_urls_are_refused() {
        for (text, needle) in [
            ("ftp://example.com/x", "only http and https"),
            ("file:///etc/passwd", "only http and https"),
            ("not a url", "is not a valid URL"),
            ("https://user:pw@example.com/", "carries credentials"),
        ] {
            let err = prepare(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(!err.contains("pw@"), "{err}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(prepare(&long).unwrap_err().contains("at most 2000"));
    }

    #[test]
    fn same_host_ignores_case_port_and_scheme() {
        let url = |s: &str| Url::parse(s).unwrap();
        assert!(same_host(
            &url("https://a.example/x"),
            &url("http://A.example:81/y")
        ));
        assert!(!same_host(
            &url("https://a.example/"),
            &url("https://b.example/")
        ));
        assert!(!same_host(
            &url("http://127.0.0.1:5/"),
            &url("http://localhost:5/")
        ));
        assert!(!same_host(
            &url("https://example.com/"),
            &url("https://www.example.com/")
        ));
    }
}
