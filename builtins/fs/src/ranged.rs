//! Reading a range of lines of a large text file in bounded memory: the file is streamed once,
//! every byte hashed (the digest a later Edit checks against), and only the lines asked for —
//! each kept to its first `MAX_LINE_CHARS` characters — are held.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::paths::Cancelled;
use crate::read::MAX_LINE_CHARS;

/// What a streamed read found.
#[derive(Debug)]
pub(crate) struct Range {
    /// The lines from the offset on (each clipped), at most the limit of them.
    pub(crate) lines: Vec<String>,
    /// How many lines the file has.
    pub(crate) total: usize,
    /// The SHA-256 of the whole file, hex.
    pub(crate) digest: String,
}

/// Why a streamed read failed.
#[derive(Debug)]
pub(crate) enum RangeError {
    /// Reading failed.
    Io(std::io::Error),
    /// A line in the range is not UTF-8 text (or holds a NUL byte).
    NotText,
}

impl From<std::io::Error> for RangeError {
    fn from(err: std::io::Error) -> Self {
        Self::Io(err)
    }
}

/// The most bytes of one line kept: enough for [`MAX_LINE_CHARS`] characters of any width.
const KEEP_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// Lines `offset..offset + limit` (from 1) of the file at `path`, `\n` or `\r\n` ending each.
/// Stops with an error once `cancelled` is set.
pub(crate) fn read_range(
    path: &Path,
    offset: usize,
    limit: usize,
    cancelled: &Cancelled,
) -> Result<Range, RangeError> {
    read_range_from(cancelled.reader(std::fs::File::open(path)?), offset, limit)
}

fn read_range_from(file: impl Read, offset: usize, limit: usize) -> Result<Range, RangeError> {
    let last = offset.saturating_add(limit).saturating_sub(1);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut hasher = Sha256::new();
    let mut lines = Vec::new();
    // The line being read: its number (from 1), its kept bytes, whether it ran past them.
    let mut number = 1_usize;
    let mut kept: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut open = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let used = chunk.len();
        hasher.update(chunk);
        let mut rest = chunk;
        while !rest.is_empty() {
            open = true;
            let (piece, ended) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            if (offset..=last).contains(&number) {
                if piece.contains(&0) {
                    return Err(RangeError::NotText);
                }
                let room = KEEP_BYTES.saturating_sub(kept.len());
                if piece.len() > room {
                    cut = true;
                }
                kept.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            rest = if ended { &rest[piece.len() + 1..] } else { &[] };
            if ended {
                if (offset..=last).contains(&number) {
                    lines.push(finish(&kept, cut)?);
                }
                kept.clear();
                cut = false;
                open = false;
                number += 1;
            }
        }
        reader.consume(used);
    }
    // A last line without a newline still counts.
    if open {
        if (offset..=last).contains(&number) {
            lines.push(finish(&kept, cut)?);
        }
        number += 1;
    }
    Ok(Range {
        lines,
        total: number - 1,
        digest: hex(&hasher.finalize()),
    })
}

/// A kept line as text: its `\r` ending dropped, clipped to [`MAX_LINE_CHARS`] characters.
fn finish(kept: &[u8], cut: bool) -> Result<String, RangeError> {
    let kept = kept.strip_suffix(b"\r").unwrap_or(kept);
    let text = match std::str::from_utf8(kept) {
        Ok(text) => text,
        // Cut inside a character: the valid part is the line as far as it was kept.
        Err(err) if cut && err.error_len().is_none() => {
            std::str::from_utf8(&kept[..err.valid_up_to()]).map_err(|_| RangeError::NotText)?
        }
        Err(_) => return Err(RangeError::NotText),
    };
    Ok(match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{} … [line truncated]", &text[..at]),
        None if cut => format!("{text} … [line truncated]"),
        None => text.to_owned(),
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str, offset: usize, limit: usize) -> Range {
        read_range_from(text.as_bytes(), offset, limit).unwrap()
    }

    #[test]
    fn the_range_total_and_digest_match_a_whole_read() {
        let text = "one\r\ntwo\nthree\nfour";
        let r = range(text, 2, 2);
        assert_eq!(r.lines, ["two", "three"]);
        assert_eq!(r.total, text.lines().count());
        assert_eq!(r.digest, noeta_core::canonical::sha256_hex(text.as_bytes()));
        assert_eq!(range(text, 4, 10).lines, ["four"]);
        assert!(range(text, 9, 1).lines.is_empty());
        assert_eq!(range("a\n", 1, 5).total, 1);
        assert_eq!(range("", 1, 5).total, 0);
    }

    #[test]
    fn chunk_boundaries_do_not_split_lines() {
        let line = "é".repeat(40_000);
        let text = format!("{line}\nshort\n{line}\n");
        let r = read_range_from(std::io::Read::chain(text.as_bytes(), &b""[..]), 2, 1).unwrap();
        assert_eq!(r.lines, ["short"]);
        let r = range(&text, 1, 1);
        assert!(r.lines[0].ends_with(" … [line truncated]"));
        assert_eq!(
            r.lines[0]
                .trim_end_matches(" … [line truncated]")
                .chars()
                .count(),
            MAX_LINE_CHARS
        );
    }

    #[test]
    fn a_nul_or_bad_utf8_in_the_range_is_not_text_but_outside_it_is_hashed_only() {
        assert!(matches!(
            read_range_from(&b"ok\nbad\x00\n"[..], 2, 1),
            Err(RangeError::NotText)
        ));
        assert!(matches!(
            read_range_from(&b"ok\n\xff\xfe\n"[..], 2, 1),
            Err(RangeError::NotText)
        ));
        let r = read_range_from(&b"ok\n\xff\xfe\n"[..], 1, 1).unwrap();
        assert_eq!(r.lines, ["ok"]);
        assert_eq!(r.total, 2);
    }
}
