//! Commands never outlive the process that started them.
//!
//! On Linux each command starts under a guardian, a POSIX shell that leads the command's
//! process group: it starts a watcher in the group, blocked reading a pipe whose only writer is
//! this noeta process ([`Tie`]), then becomes the command itself (`exec`, so the command keeps
//! its input, its signals and its exit status). When noeta ends — however it ends, `SIGKILL`
//! included — the kernel closes the pipe, the watcher reads its end and kills the whole group
//! ([`guarded`], [`tie`]). What left the group (`setsid`) is found afterwards: every command
//! carries `NOETA_RUN=<pid namespace>.<pid>.<start>` (the noeta process that started it) in its
//! environment, and while a process runs commands it keeps a file of that name in the ledger
//! directory. A later process of the same pid namespace ([`Ledger::sweep`], before it claims a
//! task) finds the files of processes that are gone, kills every process still carrying their
//! mark, and removes the files — so a resumed task never runs beside what its dead run left.

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

/// This process's pid namespace (the number of `/proc/self/ns/pid`): processes of another
/// namespace (a container sharing the home directory) are neither judged nor swept.
fn namespace() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let text = link.to_str()?;
    Some(
        text.trim_start_matches("pid:[")
            .trim_end_matches(']')
            .to_owned(),
    )
}

/// `<pid namespace>.<pid>.<start time>`: a name no other process has had since boot.
fn identity(pid: u32) -> Option<String> {
    Some(format!("{}.{pid}.{}", namespace()?, start_time(pid)?))
}

/// Whether the process named by `id` (`<namespace>.<pid>.<start>`, of this namespace) still
/// runs; `None` for a name of another namespace, or no name of ours.
fn alive(id: &str, namespace: &str) -> Option<bool> {
    let mut parts = id.split('.');
    let (Some(space), Some(pid), Some(start), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if space != namespace {
        return None;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return None;
    };
    Some(start_time(pid) == Some(start))
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
        let Some(namespace) = self.id.split('.').next() else {
            return 0;
        };
        let mut killed = 0;
        for entry in entries.flatten() {
            let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if id == self.id || alive(&id, namespace) != Some(false) {
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

/// The guardian: a watcher in the background, blocked reading descriptor 4 (the pipe of
/// [`tie`]) until noeta closes it by ending, then killing the whole group; then the command
/// itself, in the guardian's place (its input, signals and exit status its own). A command
/// started with a cleared environment does not get the `PWD` the shell sets
/// (`NOETA_GUARD_UNSET` asks for that, and is gone too).
const GUARD: &str = "(read _ <&4; kill -KILL 0) </dev/null >/dev/null 2>&1 & exec 4<&-; if [ -n \"${NOETA_GUARD_UNSET-}\" ]; then unset PWD; fi; unset NOETA_GUARD_UNSET; exec \"$@\"";

/// The variable that has the guardian leave out the `PWD` it would otherwise hand on.
pub(crate) const GUARD_UNSET: &str = "NOETA_GUARD_UNSET";

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

/// Whether `program` can be started with `path` as its `PATH` from `cwd`, as `exec` would
/// find it: the error it would give if not (the guardian itself always starts, so a missing
/// program is told apart here, as a failure to start rather than an exit status).
pub(crate) fn findable(program: &str, path: &str, cwd: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return match executable(&cwd.join(program)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
            Err(err) => Err(err),
        };
    }
    let found = std::env::split_paths(path)
        .any(|dir| executable(&cwd.join(dir).join(program)).unwrap_or(false));
    if found {
        Ok(())
    } else {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// The writing end of the pipe that ties a command's group to this process: kept while the
/// command runs, closed by the kernel when this process ends.
#[derive(Debug)]
pub(crate) struct Tie {
    _writer: std::io::PipeWriter,
}

/// The reading end of a [`Tie`], handed to the guardian as its descriptor 4; dropped once the
/// guardian has started.
#[derive(Debug)]
pub(crate) struct Loose {
    _reader: std::io::PipeReader,
}

/// Ties `command` (the guardian) to this process: its descriptor 4 is the reading end of a
/// pipe only this process writes to, and it leads a process group of its own (the group its
/// watcher kills — never this process's).
///
/// # Errors
/// When no pipe can be made.
#[cfg(target_os = "linux")]
pub(crate) fn tie(command: &mut std::process::Command) -> std::io::Result<(Tie, Loose)> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    // Both ends close on exec: no other program this process starts holds them.
    let (reader, writer) = std::io::pipe()?;
    let fd = reader.as_raw_fd();
    command.process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and calls only `dup2` and
    // `fcntl`, which are async-signal-safe, and allocates nothing.
    #[expect(
        unsafe_code,
        reason = "an inherited descriptor is set up between fork and exec"
    )]
    unsafe {
        command.pre_exec(move || {
            let result = if fd == 4 {
                libc::fcntl(4, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 4)
            };
            if result < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((Tie { _writer: writer }, Loose { _reader: reader }))
}

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
    fn a_guarded_commands_whole_group_dies_when_its_tie_is_cut() {
        let (program, args) = guarded(
            "sh",
            &[
                "-c".to_owned(),
                "sleep 301.25 & sleep 301.5; echo never".to_owned(),
            ],
        );
        let mut command = std::process::Command::new(program);
        command.args(args);
        let (tie, loose) = tie(&mut command).unwrap();
        let mut guardian = command.spawn().unwrap();
        drop(loose);
        let start = std::time::Instant::now();
        while !(running("sleep 301.25") && running("sleep 301.5")) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // What noeta's end does: the kernel closes its end of the pipe.
        drop(tie);
        let status = guardian.wait().unwrap();
        assert!(!status.success());
        let start = std::time::Instant::now();
        while running("sleep 301.25") || running("sleep 301.5") {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "a process of the group outlived its tie"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_guarded_command_keeps_sigint_and_dies_of_its_own_signal() {
        let (program, args) = guarded(
            "python3",
            &[
                "-c".to_owned(),
                "import signal, os; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True); os.kill(os.getpid(), signal.SIGTERM)".to_owned(),
            ],
        );
        let mut command = std::process::Command::new(program);
        command.args(args).stdout(std::process::Stdio::piped());
        let (_tie, loose) = tie(&mut command).unwrap();
        let child = command.spawn().unwrap();
        drop(loose);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "True\n",
            "SIGINT is not ignored"
        );
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(out.status.signal(), Some(15), "{:?}", out.status);
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
        let mut command = std::process::Command::new(program);
        command
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let (_tie, loose) = tie(&mut command).unwrap();
        let mut child = command.spawn().unwrap();
        drop(loose);
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = identity(std::process::id()).unwrap();
        let space = namespace().unwrap();
        assert_eq!(alive(&me, &space), Some(true));
        assert_eq!(alive(&format!("{space}.1.1"), &space), Some(false));
        assert_eq!(
            alive("4026531000.1.1", "4026539999"),
            None,
            "another namespace"
        );
        assert_eq!(alive("nonsense", &space), None);
    }

    #[test]
    fn a_gone_processes_marked_leftovers_are_killed_and_its_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = format!("{}.4194300.12345", namespace().unwrap());
        let gone = gone.as_str();
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
        // The parent of a `posix_spawn` resumes once the child's new memory is in place, a
        // moment before the kernel writes its environment there: wait until the mark shows.
        let start = std::time::Instant::now();
        while !marked(gone).contains(&left.id()) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "the marked process never showed its mark"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
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
