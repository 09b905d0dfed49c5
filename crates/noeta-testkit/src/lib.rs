//! Fixture plugins, the byte-golden helper and a loopback HTTP request reader for noeta's
//! tests (a dev-dependency only).

pub mod fixtures;
pub mod golden;
pub mod http;
