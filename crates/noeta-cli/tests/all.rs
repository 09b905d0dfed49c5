//! The `noeta` binary's tests: each runs the real binary with a fresh home and workspace.
//!
//! One test binary for the crate (one link, not one per file); each module is one
//! former test file, named for what it tests.

#[path = "all/agents.rs"]
mod agents;
#[path = "all/app.rs"]
mod app;
#[path = "all/browser.rs"]
mod browser;
#[path = "all/claude_plugins.rs"]
mod claude_plugins;
#[path = "all/cli.rs"]
mod cli;
#[path = "all/commands.rs"]
mod commands;
#[path = "all/crash.rs"]
mod crash;
#[path = "all/doctor.rs"]
mod doctor;
#[path = "all/http_api.rs"]
mod http_api;
#[path = "all/interrupt.rs"]
mod interrupt;
#[cfg(unix)]
#[path = "all/line_editor.rs"]
mod line_editor;
#[path = "all/mcp.rs"]
mod mcp;
#[path = "all/mcp_conformance.rs"]
mod mcp_conformance;
#[path = "all/one_runner.rs"]
mod one_runner;
#[path = "all/pipes.rs"]
mod pipes;
#[path = "all/plugin_add.rs"]
mod plugin_add;
#[path = "all/postgres.rs"]
mod postgres;
#[path = "all/program_plugins.rs"]
mod program_plugins;
#[path = "all/run.rs"]
mod run;
#[path = "all/sandbox.rs"]
mod sandbox;
#[cfg(feature = "container")]
#[path = "all/sandbox_container.rs"]
mod sandbox_container;
#[path = "all/serve.rs"]
mod serve;
#[path = "all/serve_doors.rs"]
mod serve_doors;
#[path = "all/skills.rs"]
mod skills;
#[path = "all/snapshots.rs"]
mod snapshots;
#[path = "all/start_files.rs"]
mod start_files;
#[path = "all/store.rs"]
mod store;
#[path = "all/terminal.rs"]
mod terminal;
#[path = "all/web.rs"]
mod web;
#[path = "all/workers.rs"]
mod workers;
