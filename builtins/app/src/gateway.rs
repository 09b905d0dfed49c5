//! The preview gateway: one loopback HTTP server per host process, serving each mounted app at
//! `http://127.0.0.1:<port>/apps/<task>/<app>/`: a file of the app's directory when the path
//! names one (`index.html` for a directory), everything else proxied to the app's `proxy_to`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};

/// One mounted app.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    dir: PathBuf,
    proxy_to: String,
}

/// The gateway: its address (once it serves) and its mounts.
#[derive(Debug, Default)]
pub struct Gateway {
    /// Where it serves, or why it could not start: set when the first app is mounted.
    addr: OnceLock<Result<SocketAddr, String>>,
    mounts: Arc<RwLock<BTreeMap<(String, String), Mount>>>,
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

    /// Mounts `dir` (with its API at `proxy_to`) as `app` of `task`: its URL, and whether this
    /// gateway did not serve it so already.
    ///
    /// # Errors
    /// When the gateway cannot start (no loopback port can be bound).
    pub fn mount(
        &self,
        task: &str,
        app: &str,
        dir: &Path,
        proxy_to: &str,
    ) -> Result<(String, bool), String> {
        let addr = self.serving()?;
        let mount = Mount {
            dir: dir.to_path_buf(),
            proxy_to: proxy_to.trim_end_matches('/').to_owned(),
        };
        let previous = self
            .mounts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((task.to_owned(), app.to_owned()), mount.clone());
        Ok((
            format!("http://{addr}/apps/{task}/{app}/"),
            previous.as_ref() != Some(&mount),
        ))
    }
}

/// Binds a free loopback port and serves `mounts` on it from a thread of its own.
fn listen(mounts: Arc<RwLock<BTreeMap<(String, String), Mount>>>) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("noeta-app-gateway".to_owned())
        .spawn(move || runtime.block_on(serve(listener, mounts)))?;
    Ok(addr)
}

async fn serve(
    listener: std::net::TcpListener,
    mounts: Arc<RwLock<BTreeMap<(String, String), Mount>>>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    // The proxy's client is made on the first proxied request: building one loads the
    // system's root certificates, which most runs never need.
    let client = Arc::new(Proxy::default());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let mounts = Arc::clone(&mounts);
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let mounts = Arc::clone(&mounts);
                let client = Arc::clone(&client);
                async move { Ok::<_, Infallible>(answer(request, &mounts, &client).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The client of the proxied requests, made when first needed.
#[derive(Default)]
struct Proxy(std::sync::OnceLock<reqwest::Client>);

impl Proxy {
    fn client(&self) -> &reqwest::Client {
        self.0.get_or_init(|| {
            // TLS for `https://` targets uses ring, like every other client of this process.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::new()
        })
    }
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The file `rest` names under `dir` (its `index.html` for a directory), if it is one and stays
/// inside `dir`.
fn static_file(dir: &Path, rest: &str) -> Option<PathBuf> {
    if rest.split('/').any(|part| part == "..") {
        return None;
    }
    let root = std::fs::canonicalize(dir).ok()?;
    let mut path = root.join(rest);
    if path.is_dir() {
        path = path.join("index.html");
    }
    let real = std::fs::canonicalize(&path).ok()?;
    (real.starts_with(&root) && real.is_file()).then_some(real)
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

/// Hop-by-hop headers, never forwarded.
const HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

async fn answer(
    request: Request<Incoming>,
    mounts: &RwLock<BTreeMap<(String, String), Mount>>,
    client: &Proxy,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let Some(rest) = path.strip_prefix("/apps/") else {
        return plain(
            StatusCode::NOT_FOUND,
            "not an app path: /apps/<task>/<app>/…",
        );
    };
    let mut parts = rest.splitn(3, '/');
    let (Some(task), Some(app)) = (parts.next(), parts.next()) else {
        return plain(
            StatusCode::NOT_FOUND,
            "not an app path: /apps/<task>/<app>/…",
        );
    };
    let rest = parts.next().unwrap_or("");
    let mount = mounts
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(task.to_owned(), app.to_owned()))
        .cloned();
    let Some(mount) = mount else {
        return plain(
            StatusCode::NOT_FOUND,
            format!("no app `{app}` is mounted for task {task}"),
        );
    };
    if matches!(*request.method(), hyper::Method::GET | hyper::Method::HEAD)
        && let Some(file) = static_file(&mount.dir, rest)
    {
        return match tokio::fs::read(&file).await {
            Ok(bytes) => {
                let mut response = Response::new(Full::new(Bytes::from(bytes)));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(content_type(&file)),
                );
                response
            }
            Err(err) => plain(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
        };
    }
    proxy(request, &mount, rest, client.client()).await
}

async fn proxy(
    request: Request<Incoming>,
    mount: &Mount,
    rest: &str,
    client: &reqwest::Client,
) -> Response<Full<Bytes>> {
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let target = format!("{}/{rest}{query}", mount.proxy_to);
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "the request's body could not be read",
        );
    };
    let Ok(method) = reqwest::Method::from_bytes(parts.method.as_str().as_bytes()) else {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "unsupported method");
    };
    let mut outgoing = client.request(method, &target).body(body);
    for (name, value) in &parts.headers {
        if name != hyper::header::HOST && !HOP.contains(&name.as_str()) {
            outgoing = outgoing.header(name.as_str(), value.as_bytes());
        }
    }
    let reply = match outgoing.send().await {
        Ok(reply) => reply,
        Err(err) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!(
                    "the app's server at {} did not answer: {err}",
                    mount.proxy_to
                ),
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
    let bytes = reply.bytes().await.unwrap_or_default();
    let mut response = Response::new(Full::new(bytes));
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
    use std::io::{Read as _, Write as _};

    #[test]
    fn a_lazy_gateway_listens_from_its_first_mount_on() {
        let gateway = Gateway::lazy();
        assert!(gateway.addr.get().is_none(), "nothing bound before a mount");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<p>hi</p>").unwrap();
        let api = "http://127.0.0.1:9";
        let (url, new) = gateway.mount("t1", "site", dir.path(), api).unwrap();
        assert!(new);
        let addr = gateway.serving().unwrap();
        assert_eq!(url, format!("http://{addr}/apps/t1/site/"));
        // The same mount again is served where it was, and is not new.
        assert_eq!(
            gateway.mount("t1", "site", dir.path(), api).unwrap(),
            (url, false)
        );
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET /apps/t1/site/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("<p>hi</p>"), "{reply}");
    }
}
