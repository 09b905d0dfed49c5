//! A real PostgreSQL server for a test: a fresh cluster in a temporary directory (`initdb`,
//! `pg_ctl` from Debian's `postgresql` packages), on a free loopback port, stopped and removed
//! when dropped. `initdb` refuses to run as root, so as root the cluster is made and run by the
//! `postgres` user, in a directory it owns under a world-traversable one.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A running server; dropped, it is stopped and its files removed.
#[derive(Debug)]
pub struct PgServer {
    root: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// Where `initdb` and `pg_ctl` are: a Debian versioned directory, else `PATH`.
fn binaries() -> Result<PathBuf, String> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    if let Some(bin) = versions
        .into_iter()
        .rev()
        .find(|b| b.join("initdb").is_file())
    {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).find(|dir| dir.join("initdb").is_file()))
        .ok_or_else(|| {
            "PostgreSQL is not installed (no initdb): apt-get install postgresql (`cargo xtask test` \
             installs it)"
                .to_owned()
        })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

impl PgServer {
    /// Starts a server; `durable` keeps `fsync` on (benchmarks of durable writes), otherwise
    /// it is off (tests).
    pub fn start(durable: bool) -> Result<Self, String> {
        let bin = binaries()?;
        let as_postgres = is_root();
        let root = tempfile::Builder::new()
            .prefix("noeta-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let data = root.path().join("data");
        std::fs::create_dir(&data).map_err(|e| e.to_string())?;
        if as_postgres {
            // The postgres user must reach its directory and own it.
            let run = |program: &str, args: &[&str]| -> Result<(), String> {
                let out = Command::new(program)
                    .args(args)
                    .output()
                    .map_err(|e| format!("{program}: {e}"))?;
                check(program, &out)
            };
            run("chmod", &["0755", &root.path().display().to_string()])?;
            run("chown", &["postgres", &data.display().to_string()])?;
        }
        let mut server = Self {
            root,
            bin,
            port: 0,
            as_postgres,
        };
        let data = data.display().to_string();
        server.pg(
            "initdb",
            &[
                "-D",
                &data,
                "--auth=trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C",
            ],
        )?;
        let mut last = String::new();
        // Another test may take the free port first: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let options = format!(
                "-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync={} \
                 -c synchronous_commit={} -c max_connections=200",
                if durable { "on" } else { "off" },
                if durable { "on" } else { "off" },
            );
            let log = format!("{data}/server.log");
            match server.pg(
                "pg_ctl",
                &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
            ) {
                Ok(()) => {
                    server.port = port;
                    return Ok(server);
                }
                Err(why) => last = why,
            }
        }
        Err(format!("PostgreSQL did not start: {last}"))
    }

    /// Runs one of the server's programs, as `postgres` when this process is root.
    fn pg(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let path = self.bin.join(program);
        let out = if self.as_postgres {
            let mut line = shell_quote(&path.display().to_string());
            for arg in args {
                line.push(' ');
                line.push_str(&shell_quote(arg));
            }
            Command::new("su")
                .args(["postgres", "-s", "/bin/sh", "-c", &line])
                .current_dir("/")
                .output()
        } else {
            Command::new(&path).args(args).output()
        }
        .map_err(|e| format!("{}: {e}", path.display()))?;
        check(program, &out)
    }

    /// The URL of database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new, empty database of its own: its URL.
    pub fn database(&self) -> Result<String, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.sql(&self.url(), &format!("CREATE DATABASE {name}"))?;
        Ok(format!(
            "postgres://postgres@127.0.0.1:{}/{name}",
            self.port
        ))
    }

    /// Runs `sql` in the database at `url` with `psql`: what it printed.
    pub fn sql(&self, url: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                url,
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        check("psql", &out)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Its data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.port != 0 {
            let data = self.data_dir().display().to_string();
            let _ = self.pg("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        }
    }
}

fn check(program: &str, out: &Output) -> Result<(), String> {
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
