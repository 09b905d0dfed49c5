//! Fixture plugins and the byte-golden helper for noeta's tests (a dev-dependency only).

pub mod fixtures;
pub mod golden;
