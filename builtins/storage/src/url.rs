//! Choosing a store by URL: `memory:`, `sqlite:PATH`, `postgres://…`, or the workspace's
//! `.noeta/noeta.db` by default.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use noeta_core::store::{
    Clock, ContentStore, EventLog, MemoryContentStore, MemoryEventLog, TaskQueue,
};

use crate::error::OpenError;
use crate::postgres::PgStore;
use crate::schema::MEMORY_NAME;
use crate::sqlite::SqliteStore;

/// The schemes [`StoreUrl::parse`] knows, as shown in its errors.
pub const KNOWN_SCHEMES: &str = "`memory:`, `sqlite:PATH`, `postgres://…` (or `postgresql://…`)";

/// The store a URL names, with any relative path already resolved against the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `memory:`: the kernel's in-memory store; nothing outlives the process.
    Memory,
    /// `sqlite::memory:`: an SQLite database held in memory.
    SqliteMemory,
    /// `sqlite:PATH`: an SQLite file.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: a PostgreSQL database (the URL as given).
    Postgres(String),
}

impl StoreUrl {
    /// The store used when no URL is given: `<workspace>/.noeta/noeta.db`.
    pub fn default_for(workspace: &Path) -> Self {
        Self::Sqlite(workspace.join(".noeta").join("noeta.db"))
    }

    /// Parses `url`; a relative SQLite path is taken relative to `workspace`.
    ///
    /// `sqlite:PATH` also accepts the `sqlite://PATH` spelling (so `sqlite:///abs/x.db` is
    /// absolute) and `sqlite::memory:`. The scheme is matched without regard to case.
    pub fn parse(url: &str, workspace: &Path) -> Result<Self, OpenError> {
        let bad = |reason: &str| OpenError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((scheme, rest)) = url.split_once(':') else {
            return Err(bad(&format!(
                "it has no scheme — known schemes: {KNOWN_SCHEMES}"
            )));
        };
        if scheme.eq_ignore_ascii_case("memory") {
            return if rest.is_empty() {
                Ok(Self::Memory)
            } else {
                Err(bad("`memory:` takes nothing after the colon"))
            };
        }
        if scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql") {
            if !rest.starts_with("//") || rest.len() <= 2 {
                return Err(bad(
                    "write it as `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`",
                ));
            }
            return Ok(Self::Postgres(url.to_owned()));
        }
        if scheme.eq_ignore_ascii_case("sqlite") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad("it names no database file — use `sqlite:PATH`"));
            }
            if path == MEMORY_NAME {
                return Ok(Self::SqliteMemory);
            }
            return Ok(Self::Sqlite(workspace.join(path)));
        }
        Err(OpenError::UnknownScheme {
            url: url.to_owned(),
            scheme: scheme.to_owned(),
            known: KNOWN_SCHEMES.to_owned(),
        })
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("memory:"),
            Self::SqliteMemory => write!(f, "sqlite:{MEMORY_NAME}"),
            Self::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Self::Postgres(url) => f.write_str(&crate::postgres::redact(url)),
        }
    }
}

/// An open store: the event log and the content store, which may be one object.
#[derive(Clone)]
pub struct Stores {
    /// Which store this is.
    pub url: StoreUrl,
    /// The event log.
    pub log: Arc<dyn EventLog>,
    /// The content store.
    pub content: Arc<dyn ContentStore>,
    /// The task queue, in the same database as the log.
    pub queue: Arc<dyn TaskQueue>,
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// Opens the store `url` names; leases are timed by `clock`.
    pub fn open(url: StoreUrl, clock: Arc<dyn Clock>) -> Result<Self, OpenError> {
        type Opened = (Arc<dyn EventLog>, Arc<dyn ContentStore>, Arc<dyn TaskQueue>);
        let (log, content, queue): Opened = match &url {
            StoreUrl::Memory => {
                let log = Arc::new(MemoryEventLog::new(clock));
                (log.clone(), Arc::new(MemoryContentStore::new()), log)
            }
            StoreUrl::SqliteMemory => {
                let store = Arc::new(SqliteStore::in_memory(clock)?);
                (store.clone(), store.clone(), store)
            }
            StoreUrl::Sqlite(path) => {
                let store = Arc::new(SqliteStore::open(path, clock)?);
                (store.clone(), store.clone(), store)
            }
            // Leases are timed by the database's clock, whatever this host's says.
            StoreUrl::Postgres(url) => {
                let store = Arc::new(PgStore::connect(url, None)?);
                (store.clone(), store.clone(), store)
            }
        };
        Ok(Self {
            url,
            log,
            content,
            queue,
        })
    }
}

/// Opens the store named by `url`, or `<workspace>/.noeta/noeta.db` when `url` is `None`.
///
/// Relative `sqlite:` paths are relative to `workspace`. An unknown scheme is an
/// error naming the URL and listing the known schemes.
pub fn open_store(
    url: Option<&str>,
    workspace: &Path,
    clock: Arc<dyn Clock>,
) -> Result<Stores, OpenError> {
    let url = match url {
        Some(url) => StoreUrl::parse(url, workspace)?,
        None => StoreUrl::default_for(workspace),
    };
    Stores::open(url, clock)
}
