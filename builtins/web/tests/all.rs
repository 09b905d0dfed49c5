//! The `web` plugin's integration tests, built as one binary; each module covers one part.

#[cfg(test)]
#[path = "all/common.rs"]
mod common;

#[cfg(test)]
#[path = "all/fetch.rs"]
mod fetch;
#[cfg(test)]
#[path = "all/pack.rs"]
mod pack;
#[cfg(test)]
#[path = "all/search.rs"]
mod search;
