//! The runner end to end with the scripted provider, one module per part of the runner
//! (`noeta_core::runner` and its submodules), with what they share in `support`.

mod support;

mod calls;
mod claim;
mod commands;
mod compose;
mod exec;
mod gate;
mod lease;
mod queue;
mod tree;
mod turns;
