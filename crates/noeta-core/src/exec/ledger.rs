//! Commands never outlive the process that started them.
//!
//! On Linux each command runs under a small guardian, a POSIX shell that leads the command's
//! process group and gets the parent-death signal (`SIGUSR2` when the thread that started it
//! ends — which, for noeta, is when noeta ends, even by `SIGKILL`); on that signal it kills its
//! whole group ([`guarded`], [`die_with_parent`]). What left the group (`setsid`) is found
//! afterwards: every command carries `NOETA_RUN=<pid>.<start>` (the noeta process that started
//! it) in its environment, and while a process runs commands it keeps a file of that name in
//! the ledger directory. A later process ([`Ledger::sweep`], before it claims a task) finds the
//! files of processes that are gone, kills every process still carrying their mark, and removes
//! the files — so a resumed task never runs beside what its dead run left behind.

use std::path::{Path, PathBuf};

/// The environment variable that marks a command with the noeta process that started it.
pub(crate) const MARK: &str = "NOETA_RUN";

/// This process's start time (clock ticks since boot), from `/proc/<pid>/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // After the name: state (3), then fields 4…; the start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// `<pid>.<start time>`: a name no other process has had since boot.
fn identity(pid: u32) -> Option<String> {
    start_time(pid).map(|start| format!("{pid}.{start}"))
}

/// Whether the process named by `id` (`<pid>.<start>`) still runs.
fn alive(id: &str) -> bool {
    let Some((pid, start)) = id.split_once('.') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start_time(pid) == Some(start)
}

/// The processes whose environment carries `NOETA_RUN=<id>`.
fn marked(id: &str) -> Vec<u32> {
    let mark = format!("{MARK}={id}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == mark.as_bytes()))
        })
        .collect()
}

fn kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-s", "KILL", "--", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// One process's record of running commands, in a directory shared by the user's processes.
#[derive(Debug)]
pub(crate) struct Ledger {
    dir: PathBuf,
    /// `<pid>.<start>` of this process.
    id: String,
}

impl Ledger {
    /// The ledger of this process in `dir` (`None` where processes cannot be told apart: no
    /// `/proc`).
    pub(crate) fn new(dir: &Path) -> Option<Self> {
        Some(Self {
            dir: dir.to_path_buf(),
            id: identity(std::process::id())?,
        })
    }

    /// The mark every command of this process carries.
    pub(crate) fn mark(&self) -> &str {
        &self.id
    }

    /// Commands run now: the file says so.
    pub(crate) fn opened(&self) {
        if std::fs::create_dir_all(&self.dir).is_ok() {
            let _ = std::fs::write(self.dir.join(&self.id), b"");
        }
    }

    /// No command runs now.
    pub(crate) fn closed(&self) {
        let _ = std::fs::remove_file(self.dir.join(&self.id));
    }

    /// Kills what the commands of processes that are gone left running, and forgets them: how
    /// many processes it killed.
    pub(crate) fn sweep(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut killed = 0;
        for entry in entries.flatten() {
            let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if id == self.id || alive(&id) {
                continue;
            }
            for pid in marked(&id) {
                kill(pid);
                killed += 1;
            }
            let _ = std::fs::remove_file(entry.path());
        }
        if killed > 0 {
            tracing::warn!(
                killed,
                "killed the processes commands of a noeta process that is gone left running"
            );
        }
        killed
    }
}

/// The guardian: it starts the command in its own process group (keeping its standard input),
/// waits for it and exits as it did; on `SIGUSR2` — its parent-death signal — it kills the
/// whole group, itself included.
/// (A command put in the background by a shell without job control reads `/dev/null` unless
/// told otherwise, so its input goes by way of descriptor 3.)
/// A command started with a cleared environment does not get the `PWD` the shell sets
/// (`NOETA_GUARD_UNSET` asks for that, and is gone too).
const GUARD: &str = "trap 'kill -KILL 0' USR2; if [ -n \"${NOETA_GUARD_UNSET-}\" ]; then unset PWD; fi; unset NOETA_GUARD_UNSET; exec 3<&0; \"$@\" 0<&3 3<&- & exec 3<&-; wait $!";

/// The variable that has the guardian leave out the `PWD` it would otherwise hand on.
pub(crate) const GUARD_UNSET: &str = "NOETA_GUARD_UNSET";

/// Whether `program` can be started with `path` as its `PATH` from `cwd`, as `exec` would
/// find it: the error it would give if not (the guardian itself always starts, so a missing
/// program is told apart here, as a failure to start rather than an exit status).
pub(crate) fn findable(program: &str, path: &str, cwd: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
    if program.contains('/') {
        return match executable(&cwd.join(program)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
            Err(err) => Err(err),
        };
    }
    let found = std::env::split_paths(path)
        .any(|dir| executable(&cwd.join(dir).join(program)).unwrap_or(false));
    if found { Ok(()) } else { Err(not_found()) }
}

/// `program` and `args` as run under the guardian (`/bin/sh -c GUARD noeta-guard program
/// args…`), on Linux; elsewhere as they are.
pub(crate) fn guarded(program: &str, args: &[String]) -> (String, Vec<String>) {
    if !cfg!(target_os = "linux") {
        return (program.to_owned(), args.to_vec());
    }
    let mut guarded = vec![
        "-c".to_owned(),
        GUARD.to_owned(),
        "noeta-guard".to_owned(),
        program.to_owned(),
    ];
    guarded.extend(args.iter().cloned());
    ("/bin/sh".to_owned(), guarded)
}

/// Gives `command`'s first process (the guardian) `SIGUSR2` when the thread that starts it
/// ends — with the noeta process, however it ends. The command must be started from a thread
/// that lives as long as it runs (the one that waits for it).
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and calls only `prctl` and
    // `getppid`, which are async-signal-safe, and allocates nothing.
    #[expect(
        unsafe_code,
        reason = "prctl(PR_SET_PDEATHSIG) exists only between fork and exec"
    )]
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR2, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent ended before the signal was set: end now, as it would have.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other(
                    "noeta ended before the command started",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut std::process::Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a process whose command line holds `marker` runs.
    fn running(marker: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmd| {
                String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
    }

    #[test]
    fn a_guarded_commands_whole_group_dies_with_the_thread_that_started_it() {
        let (program, args) = guarded(
            "sh",
            &[
                "-c".to_owned(),
                "sleep 301.25 & sleep 301.5; echo never".to_owned(),
            ],
        );
        let started = std::thread::spawn(move || {
            let mut command = std::process::Command::new(program);
            command.args(args);
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            die_with_parent(&mut command);
            command.spawn().unwrap()
        });
        let mut guardian = started.join().unwrap();
        // The thread that started it has ended: the guardian, the command and what the command
        // put in the background all end.
        let status = guardian.wait().unwrap();
        assert!(!status.success());
        let start = std::time::Instant::now();
        while running("sleep 301.25") || running("sleep 301.5") {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "a process of the group outlived its guardian"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_guarded_command_keeps_its_input_output_and_exit_status() {
        let (program, args) = guarded(
            "sh",
            &[
                "-c".to_owned(),
                "read line; echo \"got $line\"; exit 3".to_owned(),
            ],
        );
        let mut child = std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = identity(std::process::id()).unwrap();
        assert!(alive(&me));
        assert!(!alive("1.1"));
        assert!(!alive("nonsense"));
    }

    #[test]
    fn a_gone_processes_marked_leftovers_are_killed_and_its_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = "4194300.12345";
        std::fs::write(dir.path().join(gone), b"").unwrap();
        let mut left = std::process::Command::new("sleep")
            .arg("300")
            .env(MARK, gone)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("300")
            .env(MARK, "someone.else")
            .spawn()
            .unwrap();
        let ledger = Ledger::new(dir.path()).unwrap();
        assert_eq!(ledger.sweep(), 1);
        assert!(left.wait().is_ok_and(|s| !s.success()), "killed");
        assert!(!dir.path().join(gone).exists());
        assert!(
            other.try_wait().unwrap().is_none(),
            "an unmarked process is left alone"
        );
        let _ = other.kill();
        let _ = other.wait();
    }
}
