//! Helpers noeta plugins share without importing each other.
//!
//! Plugins never depend on one another; what several of them need lives here,
//! on top of `noeta-core` alone. Today that is the function-to-tool helper
//! [`FnTool`], which turns an async function over a typed input into a
//! [`Tool`](noeta_core::Tool).

mod fn_tool;

pub use fn_tool::{FnTool, ToolFuture};
