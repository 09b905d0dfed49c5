//! The `mcp` built-in's tests: MCP servers in process, over stdio and over HTTP,.
//!
//! One test binary for the crate (one link, not one per file); each module is one
//! former test file, named for what it tests.

#[path = "all/handshake.rs"]
mod handshake;
#[path = "all/in_process.rs"]
mod in_process;
#[path = "all/mcp.rs"]
mod mcp;
#[path = "all/remote.rs"]
mod remote;
