//! The `governance` built-in's tests: permission modes and rules, command hooks and budgets.
//!
//! One test binary for the crate (one link, not one per file); each module is one
//! former test file, named for what it tests.

#[path = "all/budget.rs"]
mod budget;
#[path = "all/common/mod.rs"]
mod common;
#[path = "all/hooks.rs"]
mod hooks;
#[path = "all/permissions.rs"]
mod permissions;
