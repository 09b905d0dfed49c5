//! The `react` built-in's tests: compaction, tool search and structured output.
//!
//! One test binary for the crate (one link, not one per file); each module is one
//! former test file, named for what it tests.

#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/search.rs"]
mod search;
#[path = "all/structured.rs"]
mod structured;
