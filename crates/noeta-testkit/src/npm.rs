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
