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
    /// The token its requests carry (see [`Server::with_token`]); `None` until known.
    pub token: Option<String>,
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
            token: None,
            child,
            _stdout: stdout,
        })
    }

    /// The same server, its requests carrying `token`.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the server to end, at most `within`: whether it ended.
    pub fn terminate(&mut self, within: std::time::Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        let start = std::time::Instant::now();
        while start.elapsed() < within {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    /// The page's address, `http://host:port/`, with the token when it is known (as `noeta
    /// serve` prints it: `#token=…`).
    pub fn page(&self) -> String {
        match &self.token {
            Some(token) => format!("http://{}/#token={token}", self.addr),
            None => format!("http://{}/", self.addr),
        }
    }

    /// One request with the server's token: the status and the body as JSON (a body that is not
    /// JSON as a string).
    ///
    /// # Panics
    /// When the server cannot be reached or answers something that is not HTTP.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call_as(method, path, body, self.token.as_deref())
    }

    /// One request carrying `token` (none when `None`): the status and the body as JSON.
    ///
    /// # Panics
    /// When the server cannot be reached or answers something that is not HTTP.
    pub fn call_as(
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

/// The token a `noeta serve` of `env` made and keeps (`~/.noeta/serve-token`), if there is one.
pub fn kept_token(env: &crate::cli::CliEnv) -> Option<String> {
    std::fs::read_to_string(env.home.join(".noeta").join("serve-token"))
        .ok()
        .map(|t| t.trim().to_owned())
}

/// `noeta serve` in `env` on a free loopback port, over `store` with two worker slots, running a
/// scripted model (so requests may name scripts of their own), with `vars` set and its standard
/// error to `stderr`. Its requests carry the token it keeps.
///
/// # Panics
/// When it does not start.
pub fn serve(
    env: &crate::cli::CliEnv,
    store: &str,
    vars: &[(&str, &str)],
    stderr: Stdio,
) -> Server {
    serve_with(env, store, vars, stderr, &[])
}

/// [`serve`] with more arguments after the usual ones.
///
/// # Panics
/// When it does not start.
pub fn serve_with(
    env: &crate::cli::CliEnv,
    store: &str,
    vars: &[(&str, &str)],
    stderr: Stdio,
    more: &[&str],
) -> Server {
    let script = env.write(
        "serve-model.json",
        &serde_json::json!({ "turns": [{ "text": "done" }] }).to_string(),
    );
    let script = format!("scripted:{}", script.display());
    let mut args = vec![
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        store,
        "--workers",
        "2",
        "--provider",
        &script,
    ];
    args.extend_from_slice(more);
    let mut command = env.command(&args);
    for (key, value) in vars {
        command.env(key, value);
    }
    let server = Server::start(command.stderr(stderr)).unwrap_or_else(|e| panic!("{e}"));
    match kept_token(env) {
        Some(token) => server.with_token(token),
        None => server,
    }
}

/// `noeta mcp serve --http` in `env` on a free loopback port: the process (stopped when
/// dropped) and the endpoint's URL, read from the line it prints on standard error.
///
/// # Panics
/// When it does not start or never says where it listens.
pub fn mcp_serve_http(env: &crate::cli::CliEnv) -> (crate::reap::Reaped, String) {
    let mut server = crate::reap::Reaped::new(
        env.command(&["mcp", "serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("noeta mcp serve does not start: {e}")),
    );
    let stderr = server
        .stderr
        .take()
        .unwrap_or_else(|| panic!("its standard error is piped"));
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        let line = line.unwrap_or_else(|e| panic!("its standard error: {e}"));
        if let Some(at) = line.find("http://") {
            let url = line[at..]
                .split([';', ' '])
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            // The rest of its standard error is read on, so its writes never meet a closed pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return (server, url);
        }
    }
    panic!("noeta mcp serve ended without saying where it listens")
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
