//! Lease holders of this machine: the worker name a process holds leases by
//! (`<prefix>@<host>#<pid>`), and whether the process behind such a name has ended, so its
//! tasks are taken over at once instead of when their leases lapse.

/// This machine's name: `/etc/hostname`, else `$HOSTNAME`, else `local`.
fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "local".to_owned())
}

/// A worker name for this process: `<prefix>@<host>#<pid>`. Two processes never share one, so
/// one refuses a task the other runs; [`process_gone`] tells when such a worker has ended.
pub fn process_worker(prefix: &str) -> String {
    format!("{prefix}@{}#{}", host_name(), std::process::id())
}

/// Whether the worker `holder` — named by [`process_worker`] on this host — has ended: its
/// process is gone, or is now another program. A holder of another host, or named otherwise,
/// is never taken for gone (its lease is waited for), except this host's `<prefix>@<host>` with
/// no process number, which older versions used for every run.
pub fn process_gone(holder: &str) -> bool {
    let Some((_, place)) = holder.split_once('@') else {
        return false;
    };
    let host = host_name();
    let Some((at, pid)) = place.rsplit_once('#') else {
        return place == host;
    };
    if at != host {
        return false;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    let proc_dir = std::path::Path::new("/proc");
    if !proc_dir.is_dir() {
        // No way to tell: wait for the lease.
        return false;
    }
    let process = proc_dir.join(pid.to_string());
    if !process.exists() {
        return true;
    }
    // A process that was killed stays a zombie until its parent (or an init that may be slow to
    // reap, as in many containers) collects it: it is gone all the same.
    if let Ok(stat) = std::fs::read_to_string(process.join("stat"))
        && let Some((_, rest)) = stat.rsplit_once(')')
        && matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))
    {
        return true;
    }
    // Alive: gone only if the number now belongs to another program (when that can be read).
    match (
        std::fs::read_link(process.join("exe")),
        std::env::current_exe(),
    ) {
        (Ok(exe), Ok(own)) => exe != own,
        _ => false,
    }
}
