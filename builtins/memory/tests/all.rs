//! The `memory` plugin's integration tests, built as one binary; each module covers one part.

#[cfg(test)]
#[path = "all/archive.rs"]
mod archive;
#[cfg(test)]
#[path = "all/common.rs"]
mod common;
#[cfg(test)]
#[path = "all/frontmatter.rs"]
mod frontmatter;
#[cfg(test)]
#[path = "all/index.rs"]
mod index;
#[cfg(test)]
#[path = "all/pack.rs"]
mod pack;
#[cfg(test)]
#[path = "all/read.rs"]
mod read;
#[cfg(test)]
#[path = "all/recall.rs"]
mod recall;
#[cfg(test)]
#[path = "all/search.rs"]
mod search;
#[cfg(test)]
#[path = "all/settings.rs"]
mod settings;
#[cfg(test)]
#[path = "all/write.rs"]
mod write;
