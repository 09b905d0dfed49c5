//! The noeta-core integration tests, built as one binary; each module covers one part of the kernel.

#[cfg(test)]
#[path = "all/support.rs"]
mod support;

#[cfg(test)]
#[path = "all/agent_models.rs"]
mod agent_models;
#[cfg(test)]
#[path = "all/direct.rs"]
mod direct;
#[cfg(test)]
#[path = "all/exec.rs"]
mod exec;
#[cfg(test)]
#[path = "all/fold.rs"]
mod fold;
#[cfg(test)]
#[path = "all/host_surface.rs"]
mod host_surface;
#[cfg(test)]
#[path = "all/identity.rs"]
mod identity;
#[cfg(test)]
#[path = "all/instances.rs"]
mod instances;
#[cfg(test)]
#[path = "all/lease.rs"]
mod lease;
#[cfg(test)]
#[path = "all/loader.rs"]
mod loader;
#[cfg(test)]
#[path = "all/manifest.rs"]
mod manifest;
#[cfg(test)]
#[path = "all/merge.rs"]
mod merge;
#[cfg(test)]
#[path = "all/parsers.rs"]
mod parsers;
#[cfg(test)]
#[path = "all/resolve.rs"]
mod resolve;
#[cfg(test)]
#[path = "all/runner/mod.rs"]
mod runner;
#[cfg(test)]
#[path = "all/store.rs"]
mod store;
#[cfg(test)]
#[path = "all/surfaces.rs"]
mod surfaces;
#[cfg(test)]
#[path = "all/tool.rs"]
mod tool;
#[cfg(test)]
#[path = "all/trust.rs"]
mod trust;
#[cfg(test)]
#[path = "all/versions.rs"]
mod versions;
