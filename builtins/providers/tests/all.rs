//! The `providers` plugin's integration tests, built as one binary, against a mock HTTP server on
//! the loopback interface (no real network).

#[cfg(test)]
#[path = "all/anthropic.rs"]
mod anthropic;
#[cfg(test)]
#[path = "all/lease.rs"]
mod lease;
#[cfg(test)]
#[path = "all/open.rs"]
mod open;
#[cfg(test)]
#[path = "all/openai.rs"]
mod openai;
#[cfg(test)]
#[path = "all/support.rs"]
mod support;
