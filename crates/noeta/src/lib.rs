//! The noeta host assembly: links the built-in plugins and loads a host's plugin set.
//!
//! This is the only crate that depends on the built-in crates. It knows the
//! host's conventions — where user and workspace plugins live, the trust
//! store, which built-ins every agent gets — and hands everything else to
//! `noeta-core`. Hosts that link their own third-party plugin crates pass them
//! in [`HostOptions::linked`].

pub mod builtins;
mod host;
pub mod listing;

pub use host::{
    ALWAYS_ON, DEFAULT_PLUGINS, HostError, HostOptions, HostPaths, activation_rules, build_session,
    default_agent, load, non_removable, sources,
};
