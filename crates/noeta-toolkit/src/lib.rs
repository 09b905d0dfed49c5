//! Helpers noeta plugins share without importing each other.
//!
//! Plugins never depend on one another; what several of them need lives here,
//! on top of `noeta-core` alone: the function-to-tool helper [`FnTool`], which
//! turns an async function over a typed input into a [`Tool`](noeta_core::Tool),
//! typed schemas and readers of plugins' public records ([`todos`],
//! [`compaction`]), calendar dates of Unix times ([`dates`]), and the reader of a
//! plugin's settings table, [`SettingsTable`], whose errors all name the plugin,
//! the key and the value, Claude Code's permission rules, [`PermissionRule`], and the
//! `Host`/`Origin` checks of a local HTTP server, [`HostCheck`].

pub mod compaction;
pub use noeta_core::dates;
mod fn_tool;
mod hosts;
mod rule;
mod settings;
pub mod todos;

pub use fn_tool::{FnTool, ToolFuture};
pub use hosts::{HostCheck, Refusal, bearer_matches, is_loopback_name, random_hex};
pub use rule::{PermissionRule, host_of, rules_allow, split_commands};
pub use settings::{SettingsError, SettingsTable, TimeUnit, WholeNumber};
