//! The `storage` built-in plugin: event-log and content stores (SQLite, PostgreSQL), chosen by URL scheme.
//!
//! [`SqliteStore`] keeps every task's event log, leases, snapshots and content
//! bodies in one SQLite file (WAL, `synchronous=FULL`), with the semantics of
//! the kernel's in-memory reference store; [`PgStore`] keeps the same in a
//! PostgreSQL database shared by many processes and hosts, its leases timed by
//! the database's clock. [`open_store`] picks a store from a URL: `memory:`,
//! `sqlite:PATH`, `postgres://…`, or `<workspace>/.noeta/noeta.db` when none is
//! given. The plugin itself contributes nothing: a store is wired by the host,
//! not mounted by an agent.

mod error;
mod postgres;
mod repair;
mod schema;
mod sqlite;
mod url;
mod worker;

use noeta_core::{LinkedPlugin, RefTable};

pub use error::OpenError;
pub use postgres::{PG_SCHEMA_VERSION, PgStore, redact as redact_url};
pub use repair::{Salvage, SalvagedTask, StoreCheck, check_store, salvage};
pub use schema::{SCHEMA_VERSION, check_file};
pub use sqlite::SqliteStore;
pub use url::{KNOWN_SCHEMES, StoreUrl, Stores, open_store};

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new(),
    )
}
