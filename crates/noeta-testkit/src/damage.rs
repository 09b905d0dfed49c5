//! Damage done to an SQLite store file on purpose, for the tests of checking and salvaging it.

use std::path::Path;

/// SQLite's page size for noeta's stores (its default).
const PAGE: usize = 4096;

/// The type byte SQLite gives a leaf page of a table's B-tree.
const TABLE_LEAF: u8 = 0x0d;

/// Overwrites with zeros the table leaf page of the SQLite file at `path` that holds `marker` —
/// where the live row is, not a stale copy left in free space of a page that has since split.
///
/// # Panics
///
/// When the file cannot be read or written, or no table leaf page holds `marker` (a test helper).
#[expect(
    clippy::expect_used,
    reason = "a test helper: failing loudly is the point"
)]
pub fn zero_page_holding(path: &Path, marker: &str) {
    let mut bytes = std::fs::read(path).expect("the store file is readable");
    let marker = marker.as_bytes();
    let start = bytes
        .windows(marker.len())
        .enumerate()
        .rev()
        .filter(|(_, window)| *window == marker)
        .map(|(at, _)| at / PAGE * PAGE)
        // Page 1 starts with the 100-byte file header; every other page with its own header.
        .find(|&page| bytes[if page == 0 { 100 } else { page }] == TABLE_LEAF)
        .unwrap_or_else(|| {
            panic!(
                "no table leaf page of {} holds `{}`",
                path.display(),
                String::from_utf8_lossy(marker)
            )
        });
    bytes[start..start + PAGE].fill(0);
    std::fs::write(path, bytes).expect("the store file is writable");
}
