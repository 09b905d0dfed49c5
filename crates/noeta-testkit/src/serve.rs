//! A `noeta serve` process for tests and benches, one-request HTTP calls to it, and where a
//! Chromium to look at its page is found.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::Value;

/// A running `noeta serve` and where it listens (`host:port`); killed when dropped.
pub struct Server {
    child: Child,
    /// `host:port`.
    pub addr: String,
    /// Its standard output, kept open: a server writing to a closed pipe would end.
    _stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `command` (a `noeta serve …` whose standard error is already set, or inherited)
    /// and waits for the API address it prints first.
    ///
    /// # Errors
    /// When the process cannot start or prints something else.
    pub fn start(command: &mut Command) -> Result<Self, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start noeta serve: {e}"))?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("noeta serve has no stdout")?);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .map_err(|e| format!("reading noeta serve's address: {e}"))?;
        let Some(addr) = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/v1/"))
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("noeta serve printed {line:?}, not its address"));
        };
        Ok(Self {
            addr: addr.to_owned(),
            child,
            _stdout: stdout,
        })
    }

    /// The page's address, `http://host:port/`.
    pub fn page(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// One request: the status and the body as JSON (a body that is not JSON as a string).
    ///
    /// # Panics
    /// When the server cannot be reached or answers something that is not HTTP.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.addr)
            .unwrap_or_else(|e| panic!("cannot reach noeta serve at {}: {e}", self.addr));
        let body = body.map(Value::to_string).unwrap_or_default();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}Content-Type: \
             application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let mut response = String::new();
        stream
            .write_all(request.as_bytes())
            .and_then(|()| stream.read_to_string(&mut response))
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: not an HTTP answer: {response:?}"));
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()));
        (status, value)
    }
}

/// `noeta serve` in `env` on a free loopback port, over `store` with two worker slots, with
/// `vars` set and its standard error to `stderr`.
///
/// # Panics
/// When it does not start.
pub fn serve(
    env: &crate::cli::CliEnv,
    store: &str,
    vars: &[(&str, &str)],
    stderr: Stdio,
) -> Server {
    let mut command = env.command(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        store,
        "--workers",
        "2",
    ]);
    for (key, value) in vars {
        command.env(key, value);
    }
    Server::start(command.stderr(stderr)).unwrap_or_else(|e| panic!("{e}"))
}

/// The Chromium on `PATH` (`chromium`, `chromium-browser` or `google-chrome`).
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
}

/// Whether this process runs as root (Chromium's own sandbox then has to be off).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
