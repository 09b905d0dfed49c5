//! Why a store could not be opened: a bad store URL, a file that is not a noeta store, a newer schema.

use std::path::PathBuf;

use noeta_core::store::StoreError;

/// An error opening a store. Once open, a store reports failures as [`StoreError`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The store URL has a scheme no backend here knows.
    #[error("store URL `{url}` has unknown scheme `{scheme}` — known schemes: {known}")]
    UnknownScheme {
        /// The URL as given.
        url: String,
        /// Its scheme.
        scheme: String,
        /// The schemes that are known, as a list for the message.
        known: String,
    },
    /// The PostgreSQL database cannot be used (unreachable, refused, a newer schema).
    #[error("cannot open the PostgreSQL store `{url}`: {reason}")]
    Postgres {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        reason: String,
    },
    /// The store URL is malformed for its scheme.
    #[error("store URL `{url}` is not valid: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory that should hold the database could not be created.
    #[error("cannot create the directory `{}` for the store: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a noeta store.
    #[error("`{}` is not a noeta store: {reason}", path.display())]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// Why it is not one.
        reason: String,
    },
    /// The file was written by a newer noeta whose schema this build cannot read.
    #[error(
        "`{}` has store schema version {found}, newer than version {supported} that this build reads — open it with a newer noeta",
        path.display()
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The version recorded in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// SQLite found the file's content damaged (a truncated file, a corrupted page).
    #[error(
        "the SQLite store `{}` is damaged: {detail} — `noeta store check` lists what is wrong; \
         `noeta store salvage NEW.db` copies every readable task into a new file and leaves this one as it is",
        path.display()
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What SQLite reported.
        detail: String,
    },
    /// The copy a salvage writes would replace a file that exists.
    #[error("`{}` exists; a salvage writes a new file and never replaces one", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A file could not be written or renamed.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused to open or set up the file.
    #[error("cannot open the SQLite store `{}`: {source}", path.display())]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The file opened, but not with the settings durability needs.
    #[error("cannot open the SQLite store `{}`: {reason}", path.display())]
    Settings {
        /// The file.
        path: PathBuf,
        /// Which setting did not take.
        reason: String,
    },
    /// The thread that owns the connection could not be started.
    #[error("cannot start the SQLite worker thread for `{}`: {source}", path.display())]
    Thread {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl From<OpenError> for StoreError {
    fn from(err: OpenError) -> Self {
        StoreError::Backend {
            message: err.to_string(),
        }
    }
}
