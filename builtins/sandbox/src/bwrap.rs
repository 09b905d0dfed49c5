//! The `bubblewrap` sandbox: every command runs in its own namespaces under `bwrap`.
//!
//! The workspace is mounted read-write at its own path, but for what noeta trusts in it —
//! `.noeta` (settings, the task store, plugins, agents, commands), `.mcp.json`, `.claude` and
//! `.git`'s `hooks` and `config` — which are read-only (the runtime writes the store from
//! outside); the rest of the file system is mounted read-only (or only the `read_only_paths`,
//! when given). The credential directories of the home (`~/.ssh`, `~/.aws`, `~/.noeta`, …,
//! [`CREDENTIALS`]) and `hidden_paths` are covered by empty ones; `/tmp`, `/run` and
//! `/var/run` are private (no host Unix socket is reachable); run as root, what only root may
//! read under `/etc` and root's home is hidden too. There is no network unless `network =
//! true`; the command's process tree lives in its own PID namespace and dies with the process
//! that started it, so nothing it starts outlives it; all capabilities are dropped. The
//! commands run in a pids cgroup of their own (`max_processes`, required when set, else a
//! default where the kernel allows), so a fork bomb stops at the limit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::{ExecCommand, ExecEnv, ExecError, ExecJob, ExecOutput, LocalExecEnv};
use noeta_core::sandbox::SandboxFactory;
use noeta_toolkit::{SettingsTable, TimeUnit};
use serde_json::Value;

use crate::cgroup::PidsCgroup;

/// The provider's name (its `sandbox_provider` contribution).
pub const NAME: &str = "bubblewrap";

/// `[plugins.sandbox]` keys.
pub(crate) const KEYS: &[&str] = &[
    "provider",
    "network",
    "read_only_paths",
    "hidden_paths",
    "max_processes",
    "timeout_ms",
    "bwrap",
    "git_writable",
];

/// What the home directory holds that no sandboxed command may read: credentials of the usual
/// tools, and noeta's own directory (its trust store, settings, token, memories).
pub(crate) const CREDENTIALS: [&str; 10] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".noeta",
];

/// What the workspace holds that noeta trusts, read-only inside the sandbox (relative to it).
/// `.git` is read-only whole unless `git_writable`; then it is mounted on itself (so it cannot
/// be renamed or replaced) with what decides what git runs read-only in it.
const PROTECTED: [&str; 3] = [".noeta", ".mcp.json", ".claude"];

/// In a writable repository, what still decides what git runs.
const GIT_PROTECTED: [&str; 5] = [
    ".git/hooks",
    ".git/config",
    ".git/commondir",
    ".git/config.worktree",
    ".git/info",
];

/// How many processes a sandbox allows unless the settings say otherwise.
const DEFAULT_MAX_PROCESSES: u32 = 512;

/// The settings of the namespace sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    network: bool,
    read_only_paths: Vec<PathBuf>,
    hidden_paths: Vec<PathBuf>,
    /// `Some(0)`: no limit; `None`: the default limit where a pids cgroup can be had.
    max_processes: Option<u32>,
    timeout: Option<Duration>,
    bwrap: Option<PathBuf>,
    /// Whether commands may write the repository (`.git`, but for its hooks and configuration).
    git_writable: bool,
}

impl Settings {
    pub(crate) fn parse(params: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("sandbox", params, KEYS).map_err(|e| e.to_string())?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let path = |text: &str| -> PathBuf {
            match (text.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => PathBuf::from(text),
            }
        };
        let paths = |key: &str| -> Result<Vec<PathBuf>, String> {
            let list = table.strings(key).map_err(|e| e.to_string())?;
            let list = list.unwrap_or_default();
            for entry in &list {
                if !entry.starts_with('/') && !entry.starts_with("~/") {
                    return Err(format!(
                        "[plugins.sandbox] {key}: `{entry}` must be an absolute path (or start with `~/`)"
                    ));
                }
            }
            Ok(list.iter().map(|p| path(p)).collect())
        };
        let mut hidden = paths("hidden_paths")?;
        if let Some(home) = &home {
            hidden.extend(CREDENTIALS.iter().map(|c| home.join(c)));
        }
        Ok(Self {
            network: table
                .bool("network")
                .map_err(|e| e.to_string())?
                .unwrap_or(false),
            read_only_paths: paths("read_only_paths")?,
            hidden_paths: hidden,
            max_processes: table
                .whole::<u32>("max_processes")
                .map_err(|e| e.to_string())?,
            timeout: table
                .positive_duration("timeout_ms", TimeUnit::Milliseconds)
                .map_err(|e| e.to_string())?,
            bwrap: table
                .string("bwrap")
                .map_err(|e| e.to_string())?
                .map(PathBuf::from),
            git_writable: table
                .bool("git_writable")
                .map_err(|e| e.to_string())?
                .unwrap_or(false),
        })
    }
}

/// The `bubblewrap` provider.
pub(crate) struct Bubblewrap;

/// The `bwrap` program the settings name, or the one on `PATH`.
fn program(settings: &Settings) -> Result<PathBuf, String> {
    match &settings.bwrap {
        Some(path) if !path.is_file() => Err(format!(
            "bubblewrap: `{}` ([plugins.sandbox] bwrap) does not exist",
            path.display()
        )),
        Some(path) => Ok(path.clone()),
        None => find_on_path("bwrap").ok_or_else(|| {
            "bubblewrap is not installed (no `bwrap` on PATH): apt-get install bubblewrap, \
             or set [plugins.sandbox] bwrap to its path"
                .to_owned()
        }),
    }
}

impl SandboxFactory for Bubblewrap {
    /// A browser runs with the file system read-only but for its profiles, the hidden paths
    /// covered, a private `/tmp`, its own process tree (ended with the process that started
    /// it), and the network of the host.
    fn browser_prefix(
        &self,
        params: &Value,
        writable: &Path,
    ) -> Result<Option<Vec<String>>, String> {
        let settings = Settings::parse(params)?;
        let program = program(&settings)?;
        std::fs::create_dir_all(writable).map_err(|err| {
            format!(
                "bubblewrap: cannot create the browser's directory {}: {err}",
                writable.display()
            )
        })?;
        let browser = Settings {
            network: true,
            ..settings
        };
        let mut prefix = vec![program.display().to_string()];
        prefix.extend(arguments(&browser, writable, false));
        // Mounted again last: the profiles live under `~/.noeta`, which is hidden.
        let dir = writable.display().to_string();
        prefix.pop();
        prefix.extend(["--bind".to_owned(), dir.clone(), dir, "--".to_owned()]);
        Ok(Some(prefix))
    }

    fn build(&self, local: Arc<LocalExecEnv>, params: &Value) -> Result<Arc<dyn ExecEnv>, String> {
        let settings = Settings::parse(params)?;
        let program = program(&settings)?;
        let workspace = std::fs::canonicalize(local.workspace())
            .unwrap_or_else(|_| local.workspace().to_path_buf());
        // A limit the settings ask for is required; the default one applies where the
        // kernel lets this process create a pids cgroup.
        let cgroup = match settings.max_processes {
            Some(0) => None,
            Some(limit) => Some(Arc::new(PidsCgroup::create(limit).map_err(|why| {
                format!(
                    "bubblewrap: cannot limit the sandbox to {limit} processes: {why} (set \
                     [plugins.sandbox] max_processes = 0 to run without a limit)"
                )
            })?)),
            None => PidsCgroup::create(DEFAULT_MAX_PROCESSES).ok().map(Arc::new),
        };
        make_protected(&workspace);
        let env = Sandboxed {
            local,
            program,
            workspace,
            settings,
            cgroup,
        };
        // A sandbox that cannot start is refused here, not at the first command.
        env.probe()?;
        Ok(Arc::new(env))
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// Commands run through `bwrap`, by the local environment.
struct Sandboxed {
    local: Arc<LocalExecEnv>,
    program: PathBuf,
    workspace: PathBuf,
    settings: Settings,
    cgroup: Option<Arc<PidsCgroup>>,
}

/// Whether this process runs as root (then a sandboxed command, root too, would read what only
/// root may read: that is hidden).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// What only root may read under `dir` (entries others cannot read, not followed through
/// links), down to `depth` levels: directories and files to cover.
fn root_private(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            if mode & 0o005 != 0o005 {
                found.push(path);
            } else if depth > 0 {
                root_private(&path, depth - 1, found);
            }
        } else if meta.is_file() && mode & 0o004 == 0 {
            found.push(path);
        }
    }
}

/// `--tmpfs` over a directory, `/dev/null` over a file: `path` as nothing.
fn cover(args: &mut Vec<String>, path: &Path) {
    let text = path.display().to_string();
    if path.is_dir() {
        args.extend(["--tmpfs".to_owned(), text]);
    } else if path.exists() {
        args.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), text]);
    }
}

/// `bwrap`'s arguments up to the command, for `settings` with `writable` mounted read-write
/// at its own path (its protected files read-only, when `protect`).
fn arguments(settings: &Settings, writable: &Path, protect: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "--die-with-parent",
        // A session of its own: no controlling terminal to push keystrokes into.
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !settings.network {
        args.push("--unshare-net".to_owned());
    }
    let text = |path: &Path| path.display().to_string();
    if settings.read_only_paths.is_empty() {
        args.extend(["--ro-bind".to_owned(), "/".to_owned(), "/".to_owned()]);
    } else {
        for path in settings.read_only_paths.iter().filter(|p| p.exists()) {
            args.extend(["--ro-bind".to_owned(), text(path), text(path)]);
        }
    }
    args.extend(
        [
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    // Where `/var/run` is a directory of its own rather than a link to `/run`.
    if std::fs::symlink_metadata("/var/run").is_ok_and(|m| m.is_dir()) {
        args.extend(["--tmpfs".to_owned(), "/var/run".to_owned()]);
    }
    // With the network on, names still resolve where the resolver's file lives under `/run`.
    if settings.network
        && let Ok(resolver) = std::fs::canonicalize("/etc/resolv.conf")
        && resolver.starts_with("/run")
    {
        args.extend(["--ro-bind".to_owned(), text(&resolver), text(&resolver)]);
    }
    if running_as_root() {
        let mut private = Vec::new();
        root_private(Path::new("/etc"), 4, &mut private);
        if writable != Path::new("/root") {
            private.push(PathBuf::from("/root"));
        }
        for path in &private {
            cover(&mut args, path);
        }
    }
    // A hidden path holding the workspace is covered before the workspace is mounted on it.
    let (around, inside): (Vec<&PathBuf>, Vec<&PathBuf>) = settings
        .hidden_paths
        .iter()
        .partition(|p| writable.starts_with(p));
    for path in around {
        cover(&mut args, path);
    }
    args.extend(["--bind".to_owned(), text(writable), text(writable)]);
    for path in inside {
        cover(&mut args, path);
    }
    if protect {
        let git = writable.join(".git");
        let mut read_only: Vec<PathBuf> = PROTECTED.iter().map(|p| writable.join(p)).collect();
        if settings.git_writable && git.is_dir() {
            args.extend(["--bind".to_owned(), text(&git), text(&git)]);
            read_only.extend(GIT_PROTECTED.iter().map(|p| writable.join(p)));
        } else {
            read_only.push(git);
        }
        for path in read_only.iter().filter(|p| p.exists()) {
            args.extend(["--ro-bind".to_owned(), text(path), text(path)]);
        }
    }
    args.push("--".to_owned());
    args
}

/// The protected directories a command could otherwise create: `.noeta`, and in a repository
/// `.git/hooks` and `.git/info`, made (empty) so they can be mounted read-only.
fn make_protected(workspace: &Path) {
    let _ = std::fs::create_dir_all(workspace.join(".noeta"));
    if workspace.join(".git").is_dir() {
        let _ = std::fs::create_dir_all(workspace.join(".git").join("hooks"));
        let _ = std::fs::create_dir_all(workspace.join(".git").join("info"));
    }
}

impl Sandboxed {
    /// `bwrap`'s arguments up to the command.
    fn arguments(&self) -> Vec<String> {
        arguments(&self.settings, &self.workspace, true)
    }

    /// `command` as it runs in the sandbox.
    fn wrap(&self, command: &ExecCommand) -> ExecCommand {
        let mut wrapped = command.clone();
        let mut args = self.arguments();
        args.push(command.program.clone());
        args.extend(command.args.iter().cloned());
        match &self.cgroup {
            Some(cgroup) => {
                // The shell joins the cgroup, then becomes bwrap: every process the command
                // starts is counted from its first fork.
                wrapped.program = "/bin/sh".to_owned();
                let mut shell = vec![
                    "-c".to_owned(),
                    "echo $$ > \"$0\" && exec \"$@\"".to_owned(),
                    cgroup.procs_file().display().to_string(),
                    self.program.display().to_string(),
                ];
                shell.extend(args);
                wrapped.args = shell;
            }
            None => {
                wrapped.program = self.program.display().to_string();
                wrapped.args = args;
            }
        }
        if let Some(limit) = self.settings.timeout {
            wrapped.timeout = Some(command.timeout.map_or(limit, |t| t.min(limit)));
        }
        wrapped
    }

    /// Runs `true` in the sandbox: `Err` names why it cannot start.
    fn probe(&self) -> Result<(), String> {
        let command = self.wrap(&ExecCommand::new("true", Vec::<String>::new()));
        let out = std::process::Command::new(&command.program)
            .args(&command.args)
            .current_dir(&self.workspace)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|err| {
                format!(
                    "bubblewrap: cannot start `{}`: {err}",
                    self.program.display()
                )
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "bubblewrap: the sandbox does not start here ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

#[async_trait]
impl ExecEnv for Sandboxed {
    fn name(&self) -> &str {
        NAME
    }

    fn workspace(&self) -> &Path {
        self.local.workspace()
    }

    fn isolation(&self) -> Option<String> {
        let mut said = vec![if self.settings.read_only_paths.is_empty() {
            "only the workspace and a private /tmp are writable".to_owned()
        } else {
            "only the workspace, a private /tmp and the read-only paths of the settings exist"
                .to_owned()
        }];
        said.push(if self.settings.git_writable {
            "the workspace's .noeta, .mcp.json, .claude and .git hooks and config are read-only"
                .to_owned()
        } else {
            "the workspace's .noeta, .mcp.json, .claude and .git are read-only (commit outside)"
                .to_owned()
        });
        said.push("credentials in the home directory are hidden; /run is private".to_owned());
        if !self.settings.network {
            said.push("no network".to_owned());
        }
        if let Some(cgroup) = &self.cgroup {
            said.push(format!("at most {} processes", cgroup.limit()));
        }
        said.push("nothing a command starts outlives it".to_owned());
        Some(said.join("; "))
    }

    async fn run(&self, command: &ExecCommand) -> Result<ExecOutput, ExecError> {
        self.local.run(&self.wrap(command)).await
    }

    fn spawn(&self, command: &ExecCommand) -> Result<Arc<dyn ExecJob>, ExecError> {
        self.local.spawn(&self.wrap(command))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sandboxed(params: Value) -> Sandboxed {
        Sandboxed {
            local: Arc::new(LocalExecEnv::new("/work/ws")),
            program: PathBuf::from("/usr/bin/bwrap"),
            workspace: PathBuf::from("/work/ws"),
            settings: Settings::parse(&params).unwrap_or_else(|e| panic!("{e}")),
            cgroup: None,
        }
    }

    #[test]
    fn a_bad_setting_is_named_with_its_key() {
        let relative = Settings::parse(&json!({ "hidden_paths": ["secrets"] }));
        assert!(
            relative
                .unwrap_err()
                .contains("[plugins.sandbox] hidden_paths: `secrets` must be an absolute path")
        );
        let wrong = Settings::parse(&json!({ "network": "yes" })).unwrap_err();
        assert!(wrong.contains("network"), "{wrong}");
        let unknown = Settings::parse(&json!({ "netwrok": true })).unwrap_err();
        assert!(unknown.contains("netwrok"), "{unknown}");
    }

    #[test]
    fn the_workspace_is_bound_after_the_read_only_root_and_the_network_is_cut() {
        let env = sandboxed(json!({}));
        let command = env.wrap(&ExecCommand::new("echo", ["hi"]));
        assert_eq!(command.program, "/usr/bin/bwrap");
        let args = command.args.join(" ");
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--cap-drop ALL"), "{args}");
        let root = args.find("--ro-bind / /").unwrap_or(usize::MAX);
        let workspace = args.find("--bind /work/ws /work/ws").unwrap_or(0);
        assert!(root < workspace, "{args}");
        assert!(args.ends_with("-- echo hi"), "{args}");

        let open = sandboxed(json!({ "network": true, "timeout_ms": 1000 }));
        let command = open.wrap(&ExecCommand::new("true", Vec::<String>::new()));
        assert!(!command.args.contains(&"--unshare-net".to_owned()));
        assert_eq!(command.timeout, Some(Duration::from_secs(1)));
    }
}
