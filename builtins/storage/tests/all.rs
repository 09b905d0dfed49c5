//! The `storage` plugin's integration tests, built as one binary; each module covers one part of the SQLite store.

#[cfg(test)]
#[path = "all/common.rs"]
mod common;

#[cfg(test)]
#[path = "all/concurrent.rs"]
mod concurrent;
#[cfg(test)]
#[path = "all/contract.rs"]
mod contract;
#[cfg(test)]
#[path = "all/durability.rs"]
mod durability;
#[cfg(test)]
#[path = "all/postgres.rs"]
mod postgres;
#[cfg(test)]
#[path = "all/repair.rs"]
mod repair;
#[cfg(test)]
#[path = "all/schema.rs"]
mod schema;
#[cfg(test)]
#[path = "all/torn.rs"]
mod torn;
#[cfg(test)]
#[path = "all/url.rs"]
mod url;
