//! The host assembly's tests: hosts opened as an embedder opens them, settings, agent files, MCP and the host operations.
//!
//! One test binary for the crate (one link, not one per file); each module is one
//! former test file, named for what it tests.

#[path = "all/core_builtins.rs"]
mod core_builtins;
#[path = "all/host.rs"]
mod host;
#[path = "all/keyring.rs"]
mod keyring;
#[path = "all/mcp_json.rs"]
mod mcp_json;
#[path = "all/parsers.rs"]
mod parsers;
#[path = "all/settings.rs"]
mod settings;
#[path = "all/settings_edit.rs"]
mod settings_edit;
#[path = "all/tasks.rs"]
mod tasks;
#[path = "all/tool_declarations.rs"]
mod tool_declarations;
#[path = "all/user_config.rs"]
mod user_config;
