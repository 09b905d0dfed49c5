//! `cargo xtask goldens [--bless]`: byte-equality goldens for every order that feeds the prompt cache.

use std::path::Path;

use anyhow::{Result, bail};
use noeta_testkit::golden::{self, GoldenOutcome};

/// Each golden: its file under the root and the bytes the code produces now.
pub(crate) fn produce() -> Result<Vec<(&'static str, Vec<u8>)>> {
    Ok(vec![
        (
            "tests/golden/surfaces.json",
            noeta::listing::surfaces_json(&noeta_core::standard_registry()).into_bytes(),
        ),
        (
            "tests/golden/builtin-contributions.json",
            noeta::listing::builtin_contributions_json()?.into_bytes(),
        ),
    ])
}

/// Checks every golden (or rewrites them with `bless`).
pub(crate) fn run(root: &Path, bless: bool) -> Result<()> {
    let mut failures = 0;
    for (file, bytes) in produce()? {
        match golden::check(&root.join(file), &bytes, bless) {
            Ok(GoldenOutcome::Same) => println!("goldens: {file} ok"),
            Ok(GoldenOutcome::Blessed) => println!("goldens: {file} blessed"),
            Err(err) => {
                eprintln!("goldens: {err}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        bail!("{failures} golden(s) differ");
    }
    Ok(())
}
