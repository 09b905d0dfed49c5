//! A pids cgroup of its own for a sandbox's commands (cgroup v2, or the v1 `pids` controller):
//! the kernel refuses a fork past its `pids.max`, whoever the processes run as. Removed when
//! the sandbox is dropped (once its processes are gone).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One cgroup, created with a limit.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
    limit: u32,
}

impl PidsCgroup {
    /// A new cgroup allowing `limit` processes, under this process's own cgroup where it can.
    pub(crate) fn create(limit: u32) -> Result<Self, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let root = pids_root().ok_or("no pids cgroup controller is mounted")?;
        let name = format!(
            "noeta-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = root.join(name);
        std::fs::create_dir(&dir)
            .map_err(|err| format!("cannot create the cgroup {}: {err}", dir.display()))?;
        let cgroup = Self { dir, limit };
        std::fs::write(cgroup.dir.join("pids.max"), limit.to_string()).map_err(|err| {
            format!(
                "cannot set {}: {err}",
                cgroup.dir.join("pids.max").display()
            )
        })?;
        Ok(cgroup)
    }

    /// The processes it allows.
    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// The file a process writes its pid to, to join.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Fails while processes remain; the kernel keeps an empty cgroup harmlessly then.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Where new pids cgroups go: cgroup v2's unified tree (when it offers `pids`), else the v1
/// `pids` hierarchy.
fn pids_root() -> Option<PathBuf> {
    let unified = Path::new("/sys/fs/cgroup");
    if std::fs::read_to_string(unified.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
    {
        return Some(unified.to_path_buf());
    }
    let v1 = unified.join("pids");
    v1.join("cgroup.procs").exists().then_some(v1)
}
