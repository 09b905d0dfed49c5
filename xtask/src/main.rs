//! Project automation: `cargo xtask test | codegen | tidy | goldens [--bless] | bench [NAME]`.

mod bench;
mod codegen;
mod floors;
mod goldens;
mod processes;
mod producers;
mod setup;
mod tidy;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  test [ARGS…]       install what the tests need where it is missing, then run the whole
                     suite (`cargo test --workspace --locked ARGS…`)
  codegen            write crates/noeta/src/builtins.rs from the directories under builtins/
  tidy               check the layering rules, the built-in crates and the generated list
  goldens [--bless]  check (or rewrite) the byte goldens under tests/golden/
  bench [NAME]       build with the release profile and print measured figures (NAME: one
                     bench, e.g. read_turn, or `processes` for the whole-process figures)";

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["test", extra @ ..] => setup::test(&root(), extra),
        ["codegen"] => codegen::write(&root()),
        ["tidy"] => {
            let problems = tidy::check(&root())?;
            if problems.is_empty() {
                println!("tidy: ok");
                Ok(())
            } else {
                for problem in &problems {
                    eprintln!("tidy: {problem}");
                }
                bail!("tidy found {} problem(s)", problems.len())
            }
        }
        ["goldens"] => goldens::run(&root(), false),
        ["goldens", "--bless"] => goldens::run(&root(), true),
        ["bench"] => bench::run(&root(), None),
        ["bench", only] => bench::run(&root(), Some(only)),
        _ => {
            eprintln!("{USAGE}");
            bail!("unknown or missing command")
        }
    }
}
