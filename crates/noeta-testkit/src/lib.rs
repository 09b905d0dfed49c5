//! Fixture plugins, the byte-golden helper, the kernel's harness (store, clock, scripted model,
//! a dying log, a plugin's session), damage done to a store file, the npm MCP reference
//! servers, a PostgreSQL server, a loopback HTTP request reader, a `noeta serve` process, the
//! generators of the parsers' property tests, how benches print a figure and the CLI test environment for noeta's tests (a
//! dev-dependency only).

pub mod bench;
pub mod cli;
pub mod container;
pub mod damage;
pub mod fixtures;
pub mod fuzz;
pub mod golden;
pub mod harness;
pub mod http;
pub mod npm;
pub mod pg;
pub mod pypi;
pub mod reap;
pub mod serve;
