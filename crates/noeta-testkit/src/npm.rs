//! The npm MCP reference servers the tests and benches run, installed by `.ci/run` into a cache
//! outside the repository: `$NOETA_TEST_NPM`, default `~/.cache/noeta-test-npm`.

use std::path::PathBuf;

/// The version `.ci/run` installs.
pub const REFERENCE_SERVERS_VERSION: &str = "2026.8.31";

/// The launcher `bin` (`mcp-server-everything`, `mcp-server-filesystem`) of the reference
/// servers.
///
/// # Panics
///
/// When it is not installed, naming where it was looked for and how to install it: a test that
/// needs it fails, never skips.
pub fn reference_server(bin: &str) -> PathBuf {
    let cache = std::env::var_os("NOETA_TEST_NPM").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/noeta-test-npm")
        },
        PathBuf::from,
    );
    let path = cache.join("node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "the MCP reference server `{bin}` is missing at {}: run `.ci/run`, or `npm install \
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
