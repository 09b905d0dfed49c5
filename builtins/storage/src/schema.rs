//! The SQLite file: connection settings, the schema (version 2: version 1's log plus the task
//! queue), migrating a version-1 file, and recognising a noeta store on open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use crate::error::OpenError;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 2;

/// The value of `format` in `noeta_meta` that marks a noeta store.
pub(crate) const FORMAT: &str = "noeta-store";

/// How long a statement waits for another connection's write lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The name SQLite and the errors use for a database held in memory.
pub(crate) const MEMORY_NAME: &str = ":memory:";

/// Version 1. Every `u64` of the store API (sequence numbers, epochs, times, lengths) is kept
/// in an `INTEGER` column as its two's-complement `i64` bit pattern, so even `u64::MAX` round-trips.
const CREATE_V1: &str = "
CREATE TABLE noeta_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE tasks (
    task_no          INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    parent_no        INTEGER REFERENCES tasks (task_no),
    created_ms       INTEGER NOT NULL,
    epoch            INTEGER NOT NULL DEFAULT 0,
    lease_worker     TEXT,
    lease_expires_ms INTEGER,
    CHECK ((lease_worker IS NULL) = (lease_expires_ms IS NULL))
) STRICT;

CREATE TABLE events (
    task_no   INTEGER NOT NULL REFERENCES tasks (task_no),
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    extension TEXT NOT NULL,
    kind      TEXT NOT NULL,
    data      TEXT NOT NULL,
    message   TEXT,
    PRIMARY KEY (task_no, seq)
) STRICT;

CREATE TABLE snapshots (
    task_no    INTEGER PRIMARY KEY REFERENCES tasks (task_no),
    seq        INTEGER NOT NULL,
    plugin_set TEXT NOT NULL,
    state      TEXT NOT NULL
) STRICT;

CREATE TABLE content (
    sha256 TEXT PRIMARY KEY NOT NULL,
    len    INTEGER NOT NULL,
    body   BLOB NOT NULL
) STRICT;
";

/// Version 2 adds the task queue: one row per runnable task (`generation` raised by every
/// enqueue, `enqueued` its order), and the workers that said they were alive.
const CREATE_V2: &str = "
CREATE TABLE queue (
    task_no    INTEGER PRIMARY KEY REFERENCES tasks (task_no),
    ready_ms   INTEGER NOT NULL,
    enqueued   INTEGER NOT NULL,
    generation INTEGER NOT NULL
) STRICT;

CREATE INDEX queue_ready ON queue (ready_ms, enqueued);

CREATE TABLE workers (
    worker  TEXT PRIMARY KEY NOT NULL,
    about   TEXT NOT NULL,
    seen_ms INTEGER NOT NULL
) STRICT;
";

/// A database file opened for the store, and whether it could only be opened for reading.
pub(crate) struct Opened {
    pub(crate) conn: Connection,
    pub(crate) read_only: bool,
}

/// Opens (creating when missing) the database file at `path`, its directory included. An
/// existing store that cannot be written (the file, or the directory its journal lives in, is
/// read-only) is opened read-only: it can be listed and read, and every write is refused.
pub(crate) fn open_file(path: &Path) -> Result<Opened, OpenError> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    }
    // A new store is readable by its owner alone (SQLite gives its journal the same mode): it
    // holds everything the agent read and said, app preview addresses included.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
    }
    let writable = Connection::open(path)
        .map_err(|e| sqlite_error(path, e))
        .and_then(|conn| prepare(conn, path, true));
    match writable {
        Ok(conn) => Ok(Opened {
            conn,
            read_only: false,
        }),
        Err(err) if path.is_file() && refused_write(&err) => Ok(Opened {
            conn: open_read_only(path)?,
            read_only: true,
        }),
        Err(err) => Err(err),
    }
}

/// Opens a fresh database held in memory.
pub(crate) fn open_memory() -> Result<Connection, OpenError> {
    let path = Path::new(MEMORY_NAME);
    let conn = Connection::open_in_memory().map_err(|e| sqlite_error(path, e))?;
    prepare(conn, path, false)
}

/// Opens the existing store at `path` for reading only: nothing is created, migrated or
/// written. In a directory that cannot be written, SQLite cannot make the shared-memory index
/// a write-ahead-log database needs; the file is then read as immutable, which is sound only
/// while no log beside it holds commits the file lacks — so a non-empty `-wal` file is refused.
pub(crate) fn open_read_only(path: &Path) -> Result<Connection, OpenError> {
    match read_only(path, false)? {
        (_, Some(damage)) => Err(damage),
        (conn, None) => Ok(conn),
    }
}

/// [`open_read_only`]; `tolerant` for reading what damage allows: SQLite then accepts a schema
/// naming pages past the end of a truncated file (each table still fails on its own when read),
/// and a file whose `noeta_meta` table cannot be read for damage is returned with that damage.
pub(crate) fn read_only(
    path: &Path,
    tolerant: bool,
) -> Result<(Connection, Option<OpenError>), OpenError> {
    let open = |uri: &str| -> Result<(Connection, Option<OpenError>), OpenError> {
        let err = |e| sqlite_error(path, e);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(uri, flags).map_err(err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        if tolerant {
            // The connection is read-only: this relaxes how the schema is read, and writes nothing.
            conn.pragma_update(None, "writable_schema", true)
                .map_err(err)?;
        }
        match inspect(&conn, path) {
            Ok(Found::Current | Found::Older(_)) => Ok((conn, None)),
            Err(damage @ OpenError::Damaged { .. }) if tolerant => Ok((conn, Some(damage))),
            Ok(Found::Empty) => Err(OpenError::NotAStore {
                path: path.to_owned(),
                reason: "it holds no tables (an empty database)".to_owned(),
            }),
            Err(err) => Err(err),
        }
    };
    let uri = file_uri(path);
    match open(&format!("{uri}?mode=ro")) {
        Err(err) if refused_write(&err) => {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            let wal = PathBuf::from(wal);
            if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
                return Err(OpenError::Settings {
                    path: path.to_owned(),
                    reason: format!(
                        "it can only be read, and its write-ahead log `{}` holds commits that \
                         SQLite cannot read without writing beside the file; copy the store and \
                         its `-wal` file to a directory you can write, and open the copy",
                        wal.display()
                    ),
                });
            }
            open(&format!("{uri}?mode=ro&immutable=1"))
        }
        opened => opened,
    }
}

/// `path` as an SQLite `file:` URI: every byte but unreserved ones and `/` percent-encoded.
fn file_uri(path: &Path) -> String {
    use std::fmt::Write as _;
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            let _ = write!(uri, "%{byte:02X}");
        }
    }
    uri
}

/// Whether opening failed because the file, or the directory beside it, cannot be written.
fn refused_write(err: &OpenError) -> bool {
    matches!(
        err,
        OpenError::Sqlite { source, .. }
            if matches!(
                source.sqlite_error_code(),
                Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
            )
    )
}

/// What SQLite's quick check finds wrong in the store file at `path` (at most 20 lines; none
/// when the file is sound), read without writing: the file is opened read-only and nothing is
/// migrated. A file SQLite cannot open is the error.
pub fn check_file(path: &Path) -> Result<Vec<String>, OpenError> {
    let conn = open_read_only(path)?;
    integrity(&conn, path, "quick_check", 20)
}

/// The lines of SQLite's `integrity_check` or `quick_check` that are not `ok` (at most `max`).
pub(crate) fn integrity(
    conn: &Connection,
    path: &Path,
    pragma: &str,
    max: u32,
) -> Result<Vec<String>, OpenError> {
    let checked = conn
        .prepare(&format!("PRAGMA {pragma}({max})"))
        .and_then(|mut check| {
            check
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<String>, _>>()
        });
    match checked {
        Ok(lines) => Ok(lines.into_iter().filter(|line| line != "ok").collect()),
        // Damage bad enough to stop the check is what it found.
        Err(e) if damaged(&e) => Ok(vec![e.to_string()]),
        Err(e) => Err(sqlite_error(path, e)),
    }
}

/// Whether SQLite's error says the file's content is damaged.
pub(crate) fn damaged(err: &rusqlite::Error) -> bool {
    err.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt)
}

pub(crate) fn sqlite_error(path: &Path, source: rusqlite::Error) -> OpenError {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => OpenError::NotAStore {
            path: path.to_owned(),
            reason: "it is not an SQLite database".to_owned(),
        },
        Some(ErrorCode::DatabaseCorrupt) => OpenError::Damaged {
            path: path.to_owned(),
            detail: source.to_string(),
        },
        _ => OpenError::Sqlite {
            path: path.to_owned(),
            source,
        },
    }
}

/// Applies the durability settings, then finds or creates the schema.
fn prepare(mut conn: Connection, path: &Path, file: bool) -> Result<Connection, OpenError> {
    let err = |e| sqlite_error(path, e);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    // The first statement that reads the file: one that is not SQLite fails here.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(err)?;
    if file && !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Settings {
            path: path.to_owned(),
            reason: format!("SQLite kept journal mode `{mode}` instead of switching to `wal`"),
        });
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(err)?;
    if inspect(&conn, path)? != Found::Current {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        // Another connection may have created or migrated the schema since the first look.
        match inspect(&tx, path)? {
            Found::Empty => {
                tx.execute_batch(CREATE_V1).map_err(err)?;
                tx.execute_batch(CREATE_V2).map_err(err)?;
                let version = SCHEMA_VERSION.to_string();
                tx.execute(
                    "INSERT INTO noeta_meta (key, value) VALUES ('format', ?1), ('schema_version', ?2)",
                    [FORMAT, version.as_str()],
                )
                .map_err(err)?;
            }
            Found::Older(1) => {
                tx.execute_batch(CREATE_V2).map_err(err)?;
                tx.execute(
                    "UPDATE noeta_meta SET value = ?1 WHERE key = 'schema_version'",
                    [SCHEMA_VERSION.to_string()],
                )
                .map_err(err)?;
            }
            Found::Older(_) | Found::Current => {}
        }
        tx.commit().map_err(err)?;
    }
    Ok(conn)
}

#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// No tables at all: a new file.
    Empty,
    /// A noeta store of this build's schema version.
    Current,
    /// A noeta store of an older version this build migrates (read as it is when read-only).
    Older(u32),
}

fn inspect(conn: &Connection, path: &Path) -> Result<Found, OpenError> {
    let err = |e| sqlite_error(path, e);
    let not_a_store = |reason: String| OpenError::NotAStore {
        path: path.to_owned(),
        reason,
    };
    let has_meta: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'noeta_meta')",
            [],
            |row| row.get(0),
        )
        .map_err(err)?;
    if !has_meta {
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
                [],
                |row| row.get(0),
            )
            .map_err(err)?;
        return if tables == 0 {
            Ok(Found::Empty)
        } else {
            Err(not_a_store(format!(
                "it is an SQLite database with {tables} other table(s) and no `noeta_meta` table"
            )))
        };
    }
    let meta: BTreeMap<String, String> = conn
        .prepare("SELECT key, value FROM noeta_meta")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .map_err(err)?;
    match meta.get("format").map(String::as_str) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(not_a_store(format!(
                "its `noeta_meta` table names format `{other}`, not `{FORMAT}`"
            )));
        }
        None => {
            return Err(not_a_store(
                "its `noeta_meta` table has no `format` row".to_owned(),
            ));
        }
    }
    let raw = meta.get("schema_version").map_or("", String::as_str);
    let version: u32 = raw.parse().map_err(|_| {
        not_a_store(format!(
            "its `noeta_meta` table has schema version `{raw}`, which is not a number"
        ))
    })?;
    if version > SCHEMA_VERSION {
        return Err(OpenError::NewerSchema {
            path: path.to_owned(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version < 1 {
        return Err(not_a_store(format!(
            "schema version {version} is older than any this build knows (oldest 1)"
        )));
    }
    Ok(if version < SCHEMA_VERSION {
        Found::Older(version)
    } else {
        Found::Current
    })
}
