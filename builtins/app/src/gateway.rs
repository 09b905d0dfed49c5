//! The preview gateway: one loopback HTTP server per host process, serving each mounted app at
//! `http://127.0.0.1:<port>/apps/<task>/<app>-<secret>/`: a file of the app's directory when the
//! path names one (`index.html` for a directory), everything else proxied to the app's
//! `proxy_to`.
//!
//! Each mount's path carries 128 random bits, so only whoever was given the URL can reach the
//! app; a request whose `Host` is not the gateway's own loopback address is refused (no DNS
//! rebinding), and so is a request that would change something from another site.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use noeta_toolkit::HostCheck;
use reqwest::Url;

use crate::paths;
use crate::proxy::{Proxy, ProxyRule};

/// One mounted app.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    dir: PathBuf,
    proxy_to: Url,
    rule: Arc<ProxyRule>,
}

/// The mounts: by task and path segment (`<app>-<secret>`), and each app's segment.
#[derive(Debug, Default)]
struct Mounts {
    by_path: BTreeMap<(String, String), Mount>,
    segments: BTreeMap<(String, String), String>,
}

type Shared = Arc<RwLock<Mounts>>;

/// The gateway: its address (once it serves) and its mounts.
#[derive(Debug, Default)]
pub struct Gateway {
    /// Where it serves, or why it could not start: set when the first app is mounted.
    addr: OnceLock<Result<SocketAddr, String>>,
    mounts: Shared,
}

impl Gateway {
    /// Starts a gateway on a free loopback port now, served by a thread of its own.
    ///
    /// # Errors
    /// When no loopback port can be bound, or the thread cannot start.
    pub fn start() -> std::io::Result<Arc<Self>> {
        let gateway = Self::lazy();
        gateway.serving().map_err(std::io::Error::other)?;
        Ok(gateway)
    }

    /// A gateway that starts when the first app is mounted: a process that opens no app binds
    /// no port and starts no thread.
    pub fn lazy() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Its address, starting it first when it does not serve yet.
    fn serving(&self) -> Result<SocketAddr, String> {
        self.addr
            .get_or_init(|| {
                listen(Arc::clone(&self.mounts))
                    .map_err(|err| format!("the preview gateway cannot start: {err}"))
            })
            .clone()
    }

    /// Mounts `dir` (with its API at `proxy_to`, reached under `rule`) as `app` of `task`: its
    /// URL, and whether this gateway did not serve it so already. An app mounted again keeps
    /// its address.
    ///
    /// # Errors
    /// When the gateway cannot start (no loopback port can be bound).
    pub(crate) fn mount(
        &self,
        task: &str,
        app: &str,
        dir: &Path,
        proxy_to: Url,
        rule: Arc<ProxyRule>,
    ) -> Result<(String, bool), String> {
        let addr = self.serving()?;
        let mount = Mount {
            dir: dir.to_path_buf(),
            proxy_to,
            rule,
        };
        let mut mounts = self.mounts.write().unwrap_or_else(PoisonError::into_inner);
        let key = (task.to_owned(), app.to_owned());
        let segment = match mounts.segments.get(&key) {
            Some(segment) => segment.clone(),
            None => {
                // 128 random bits: only whoever is given the address reaches the app.
                let segment = format!("{app}-{}", noeta_toolkit::random_hex(16)?);
                mounts.segments.insert(key, segment.clone());
                segment
            }
        };
        let previous = mounts
            .by_path
            .insert((task.to_owned(), segment.clone()), mount.clone());
        Ok((
            format!("http://{addr}/apps/{task}/{segment}/"),
            previous.as_ref() != Some(&mount),
        ))
    }
}

/// Binds a free loopback port and serves `mounts` on it from a thread of its own.
fn listen(mounts: Shared) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let hosts = Arc::new(HostCheck::loopback(addr.port()));
    std::thread::Builder::new()
        .name("noeta-app-gateway".to_owned())
        .spawn(move || runtime.block_on(serve(listener, mounts, hosts)))?;
    Ok(addr)
}

/// How long a request's header may take (the same deadline ends an idle keep-alive connection).
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// At most this many connections are served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 128;

async fn serve(listener: std::net::TcpListener, mounts: Shared, hosts: Arc<HostCheck>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let proxy = Arc::new(Proxy::default());
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let mounts = Arc::clone(&mounts);
        let proxy = Arc::clone(&proxy);
        let hosts = Arc::clone(&hosts);
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let mounts = Arc::clone(&mounts);
                let proxy = Arc::clone(&proxy);
                let hosts = Arc::clone(&hosts);
                async move { Ok::<_, Infallible>(answer(request, &mounts, &hosts, &proxy).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

pub(crate) fn plain(status: StatusCode, text: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn header<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Why a request is refused before it reaches an app, if it is: a `Host` that is not the
/// gateway's, or a request that changes something sent from another site.
fn refused(request: &Request<Incoming>, hosts: &HostCheck) -> Option<Response<Full<Bytes>>> {
    let host = header(request, "host");
    if let Err(refusal) = hosts.check_host(host) {
        return Some(plain(StatusCode::MISDIRECTED_REQUEST, refusal.reason));
    }
    if matches!(
        *request.method(),
        hyper::Method::GET | hyper::Method::HEAD | hyper::Method::OPTIONS
    ) {
        return None;
    }
    if header(request, "sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none") {
        return Some(plain(
            StatusCode::FORBIDDEN,
            "a request from another site is refused",
        ));
    }
    hosts
        .check_origin(header(request, "origin"), host.unwrap_or_default())
        .err()
        .map(|refusal| plain(StatusCode::FORBIDDEN, refusal.reason))
}

async fn answer(
    request: Request<Incoming>,
    mounts: &RwLock<Mounts>,
    hosts: &HostCheck,
    proxy: &Proxy,
) -> Response<Full<Bytes>> {
    if let Some(refusal) = refused(&request, hosts) {
        return refusal;
    }
    let path = request.uri().path().to_owned();
    let not_an_app = || {
        plain(
            StatusCode::NOT_FOUND,
            "not an app path: /apps/<task>/<app>/…",
        )
    };
    let Some(rest) = path.strip_prefix("/apps/") else {
        return not_an_app();
    };
    let mut parts = rest.splitn(3, '/');
    let (Some(task), Some(segment)) = (parts.next(), parts.next()) else {
        return not_an_app();
    };
    let mount = mounts
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .by_path
        .get(&(task.to_owned(), segment.to_owned()))
        .cloned();
    let Some(mount) = mount else {
        // The same answer whether the task or the secret is wrong.
        return plain(StatusCode::NOT_FOUND, "no app is mounted at this address");
    };
    let rest = match paths::rest(parts.next().unwrap_or("")) {
        Ok(rest) => rest,
        Err(why) => return plain(StatusCode::BAD_REQUEST, why),
    };
    if matches!(*request.method(), hyper::Method::GET | hyper::Method::HEAD)
        && let Some(file) = paths::static_file(&mount.dir, &rest)
    {
        if std::fs::metadata(&file).is_ok_and(|m| m.len() > crate::proxy::MAX_BODY as u64) {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the file is over {} bytes, more than the preview serves",
                    crate::proxy::MAX_BODY
                ),
            );
        }
        return match tokio::fs::read(&file).await {
            Ok(bytes) => {
                let mut response = Response::new(Full::new(Bytes::from(bytes)));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(content_type(&file)),
                );
                response.headers_mut().insert(
                    hyper::header::X_CONTENT_TYPE_OPTIONS,
                    hyper::header::HeaderValue::from_static("nosniff"),
                );
                response
            }
            Err(err) => plain(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
        };
    }
    crate::proxy::forward(request, &mount.proxy_to, &rest.raw, &mount.rule, proxy).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    fn get(addr: SocketAddr, head: &str) -> String {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(stream, "{head}Connection: close\r\n\r\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn a_lazy_gateway_listens_from_its_first_mount_on_at_an_unguessable_address() {
        let gateway = Gateway::lazy();
        assert!(gateway.addr.get().is_none(), "nothing bound before a mount");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<p>hi</p>").unwrap();
        let api = Url::parse("http://127.0.0.1:9").unwrap();
        let rule = Arc::new(ProxyRule::default());
        let (url, new) = gateway
            .mount("t1", "site", dir.path(), api.clone(), Arc::clone(&rule))
            .unwrap();
        assert!(new);
        let addr = gateway.serving().unwrap();
        let prefix = format!("http://{addr}/apps/t1/site-");
        assert!(url.starts_with(&prefix), "{url}");
        let secret = url[prefix.len()..].trim_end_matches('/');
        assert_eq!(secret.len(), 32, "{url}");
        // The same mount again is served where it was, and is not new.
        assert_eq!(
            gateway.mount("t1", "site", dir.path(), api, rule).unwrap(),
            (url.clone(), false)
        );
        let path = url.trim_start_matches(&format!("http://{addr}"));
        let reply = get(addr, &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n"));
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("<p>hi</p>"), "{reply}");
        // Without the secret, or for another Host, nothing.
        let reply = get(
            addr,
            &format!("GET /apps/t1/site/ HTTP/1.1\r\nHost: {addr}\r\n"),
        );
        assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
        let reply = get(
            addr,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: evil.example:{}\r\n",
                addr.port()
            ),
        );
        assert!(reply.starts_with("HTTP/1.1 421"), "{reply}");
        let reply = get(
            addr,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\nContent-Length: 0\r\n"
            ),
        );
        assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
        let reply = get(
            addr,
            &format!("GET {path}%2e%2e/x HTTP/1.1\r\nHost: {addr}\r\n"),
        );
        assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    }
}
