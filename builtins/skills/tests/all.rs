//! The `skills` plugin's integration tests, built as one binary; each module covers one part.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

#[path = "all/common.rs"]
mod common;
#[path = "all/frontmatter.rs"]
mod frontmatter;
#[path = "all/gate.rs"]
mod gate;
#[path = "all/menu.rs"]
mod menu;
#[path = "all/scripts.rs"]
mod scripts;
#[path = "all/settings.rs"]
mod settings;
#[path = "all/tiers.rs"]
mod tiers;
#[path = "all/tool.rs"]
mod tool;
