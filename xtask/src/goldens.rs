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
        (
            "tests/golden/control-tools.json",
            noeta::listing::control_tool_schemas_json()?.into_bytes(),
        ),
        (
            "tests/golden/builtin-tools.json",
            noeta::listing::builtin_tool_schemas_json()?.into_bytes(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_golden_matches_and_a_changed_byte_is_caught() {
        let root = crate::root();
        for (file, bytes) in produce().unwrap() {
            golden::check(&root.join(file), &bytes, false).unwrap();
            // A tool description edited by one character no longer matches its golden.
            let mut changed = bytes.clone();
            if let Some(pos) = changed.iter().position(|b| b.is_ascii_lowercase()) {
                changed[pos] = changed[pos].to_ascii_uppercase();
                assert!(
                    golden::check(&root.join(file), &changed, false).is_err(),
                    "{file}"
                );
            }
        }
    }
}
