//! The `fs` plugin's integration tests, built as one binary; each module covers one tool or part.

#[cfg(test)]
#[path = "all/bash.rs"]
mod bash;
#[cfg(test)]
#[path = "all/cancel.rs"]
mod cancel;
#[cfg(test)]
#[path = "all/common.rs"]
mod common;

#[cfg(test)]
#[path = "all/edit.rs"]
mod edit;
#[cfg(test)]
#[path = "all/glob.rs"]
mod glob;
#[cfg(test)]
#[path = "all/grep.rs"]
mod grep;
#[cfg(test)]
#[path = "all/jobs.rs"]
mod jobs;
#[cfg(test)]
#[path = "all/monitor.rs"]
mod monitor;
#[cfg(test)]
#[path = "all/pack.rs"]
mod pack;
#[cfg(test)]
#[path = "all/read.rs"]
mod read;
#[cfg(test)]
#[path = "all/roots.rs"]
mod roots;
#[cfg(test)]
#[path = "all/task.rs"]
mod task;
#[cfg(test)]
#[path = "all/write.rs"]
mod write;
