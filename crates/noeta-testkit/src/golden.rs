//! Byte goldens: compare produced bytes with a checked-in file, or rewrite it when blessing.

use std::fmt;
use std::path::{Path, PathBuf};

/// What a golden check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoldenOutcome {
    /// The file holds exactly the produced bytes.
    Same,
    /// The file was (re)written because blessing was asked for.
    Blessed,
}

/// A golden that does not match, or cannot be read or written.
#[derive(Debug)]
pub struct GoldenError {
    /// The golden file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for GoldenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "golden `{}`: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for GoldenError {}

/// Compares `actual` with the file at `path`; with `bless`, writes it instead.
pub fn check(path: &Path, actual: &[u8], bless: bool) -> Result<GoldenOutcome, GoldenError> {
    let fail = |message: String| GoldenError {
        path: path.to_path_buf(),
        message,
    };
    if bless {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| fail(format!("cannot create its directory: {e}")))?;
        }
        std::fs::write(path, actual).map_err(|e| fail(format!("cannot write: {e}")))?;
        return Ok(GoldenOutcome::Blessed);
    }
    let expected = std::fs::read(path).map_err(|e| {
        fail(format!(
            "cannot read ({e}); run `cargo xtask goldens --bless` to create it"
        ))
    })?;
    if expected == actual {
        return Ok(GoldenOutcome::Same);
    }
    let first_difference = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let line = actual[..first_difference]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1;
    Err(fail(format!(
        "differs from the produced bytes at byte {first_difference} (line {line}; {} bytes expected, {} produced) — if the change is intended, run `cargo xtask goldens --bless` and say why in the commit",
        expected.len(),
        actual.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_pass_and_different_bytes_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        assert_eq!(
            check(&path, b"a\nb\n", true).unwrap(),
            GoldenOutcome::Blessed
        );
        assert_eq!(check(&path, b"a\nb\n", false).unwrap(), GoldenOutcome::Same);
        let err = check(&path, b"a\nc\n", false).unwrap_err();
        assert!(err.to_string().contains("g.txt"), "{err}");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn a_missing_golden_says_how_to_create_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = check(&dir.path().join("none.txt"), b"x", false).unwrap_err();
        assert!(err.to_string().contains("--bless"), "{err}");
    }
}
