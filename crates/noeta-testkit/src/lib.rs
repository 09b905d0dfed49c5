//! Fixture plugins, the byte-golden helper, a loopback HTTP request reader and the CLI test
//! environment for noeta's tests (a dev-dependency only).

pub mod cli;
pub mod fixtures;
pub mod golden;
pub mod http;
