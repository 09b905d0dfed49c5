//! The CLI test environment: the real `noeta` binary run with its own home and workspace
//! under one temporary directory, so nothing of the real user or machine is read.
//!
//! The binary's path comes from the test (`env!("CARGO_BIN_EXE_noeta")` is known only to the
//! CLI crate's own tests). Model keys and base URLs are removed from the child's environment,
//! so a run is offline unless a test says otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// The variables a run never inherits: they would reach a real model.
const SCRUBBED: [&str; 4] = [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
];

/// A home and a workspace under one temporary directory, and the binary to run in them.
#[derive(Debug)]
pub struct CliEnv {
    root: tempfile::TempDir,
    binary: PathBuf,
    /// `$HOME` of every run.
    pub home: PathBuf,
    /// The working directory of every run.
    pub workspace: PathBuf,
}

impl CliEnv {
    /// A fresh environment running `binary`; the paths are canonical, so they compare with
    /// what the binary prints.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        let root = tempfile::tempdir().expect("a temporary directory");
        let base = root
            .path()
            .canonicalize()
            .expect("the temporary directory's canonical path");
        let home = base.join("home");
        let workspace = base.join("workspace");
        std::fs::create_dir_all(&home).expect("the home directory");
        std::fs::create_dir_all(&workspace).expect("the workspace");
        Self {
            root,
            binary: binary.into(),
            home,
            workspace,
        }
    }

    /// The directory holding home and workspace.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// A command for the binary with `args`, in the workspace, with this home.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = self.program(&self.binary);
        command.args(args);
        command
    }

    /// A command for another `program` (an outside client that starts the binary itself),
    /// run as the binary is: in the workspace, with this home, without model keys.
    pub fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("HOME", &self.home).current_dir(&self.workspace);
        for name in SCRUBBED {
            command.env_remove(name);
        }
        command
    }

    /// Runs the binary with `args`; standard input is closed.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None, &[])
    }

    /// Runs the binary with `args`, `stdin` piped in (closed at once when `None`) and extra
    /// environment variables.
    ///
    /// # Panics
    ///
    /// When the binary cannot be started (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn run_with(&self, args: &[&str], stdin: Option<&str>, vars: &[(&str, &str)]) -> Output {
        let mut child = self
            .command(args)
            .envs(vars.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the noeta binary starts");
        if let Some(text) = stdin
            && let Some(mut pipe) = child.stdin.take()
        {
            // A binary that exits before reading it all closes the pipe: that is its answer.
            let _ = pipe.write_all(text.as_bytes());
        }
        child.wait_with_output().expect("the noeta binary finishes")
    }

    /// Writes `text` to `path` (relative paths are under the workspace), making parents.
    ///
    /// # Panics
    ///
    /// When the file cannot be written (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn write(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = self.workspace.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("the file's directory");
        }
        std::fs::write(&path, text).expect("the file is written");
        path
    }

    /// Trusts the workspace as it is now, as `noeta trust .` does: its project settings, hooks,
    /// `.mcp.json`, plugins, agent files and commands count until one of them changes.
    ///
    /// # Panics
    /// When the trust store cannot be written (a test helper).
    #[expect(
        clippy::expect_used,
        reason = "a test helper: failing loudly is the point"
    )]
    pub fn trust(&self) {
        noeta_core::TrustStore::of_home(&self.home)
            .and_then(|mut store| store.grant(&self.workspace))
            .expect("the workspace is trusted");
    }

    /// [`CliEnv::write`], then [`CliEnv::trust`]: a project file the user wrote, which is to
    /// count. Its path.
    pub fn write_trusted(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = self.write(path, text);
        self.trust();
        path
    }

    /// A user plugin `~/.noeta/plugins/<dir>/noeta-plugin.toml`; its path.
    pub fn user_plugin(&self, dir: &str, manifest: &str) -> PathBuf {
        self.write(
            self.home
                .join(".noeta/plugins")
                .join(dir)
                .join("noeta-plugin.toml"),
            manifest,
        )
    }

    /// A workspace plugin `<workspace>/.noeta/plugins/<dir>/noeta-plugin.toml`; its path.
    pub fn workspace_plugin(&self, dir: &str, manifest: &str) -> PathBuf {
        self.write(
            self.workspace
                .join(".noeta/plugins")
                .join(dir)
                .join("noeta-plugin.toml"),
            manifest,
        )
    }

    /// A model script of `turns` in the workspace; the `--provider` value that plays it.
    pub fn script(&self, turns: Value) -> String {
        self.script_file(json!({ "turns": turns }))
    }

    /// A whole model script (with `agents` for subagents); the `--provider` value.
    pub fn script_file(&self, script: Value) -> String {
        let path = self.write("script.json", &script.to_string());
        format!("scripted:{}", path.display())
    }

    /// `text` with this environment's paths replaced by `[HOME]`, `[WORKSPACE]` and `[TMP]`,
    /// so output that names them can be compared across runs.
    pub fn redact(&self, text: &str) -> String {
        let base = self
            .root
            .path()
            .canonicalize()
            .unwrap_or_else(|_| self.root.path().to_owned());
        text.replace(&self.home.display().to_string(), "[HOME]")
            .replace(&self.workspace.display().to_string(), "[WORKSPACE]")
            .replace(&base.display().to_string(), "[TMP]")
            .replace(&self.root.path().display().to_string(), "[TMP]")
    }
}

/// Standard output as text (lossy).
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text (lossy).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
