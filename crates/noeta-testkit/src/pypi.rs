//! The Python MCP client the tests drive `noeta mcp serve` with: the `mcp` package from PyPI,
//! installed by `cargo xtask test` into a virtual environment outside the repository: `$NOETA_TEST_PY`,
//! default `~/.cache/noeta-test-py`.

use std::path::PathBuf;

/// The version of the `mcp` package `cargo xtask test` installs.
pub const MCP_CLIENT_VERSION: &str = "2.3.0";

/// The virtual environment's Python, which can `import mcp`.
///
/// # Panics
///
/// When it is not installed, naming where it was looked for and how to install it: a test that
/// needs it fails, never skips.
pub fn mcp_python() -> PathBuf {
    let venv = std::env::var_os("NOETA_TEST_PY").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/noeta-test-py"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    let imports = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        imports,
        "the Python MCP client is missing: {} cannot `import mcp`. Run `cargo xtask test`, or `python3 -m \
         venv {} && {}/bin/pip install mcp=={MCP_CLIENT_VERSION}`",
        python.display(),
        venv.display(),
        venv.display()
    );
    python
}
