//! What an `Edit` or a `Write` changed, as a coloured unified diff.

use similar::{ChangeTag, TextDiff};

use crate::style::{ADDED, DIM, HUNK, REMOVED, paint};

/// Lines of context around each change.
const CONTEXT: usize = 2;

/// The diff of `old` to `new` in `path`, each line styled; at most `limit` diff lines, the rest
/// counted in a last line.
pub(crate) fn render(path: &str, old: &str, new: &str, limit: Option<usize>) -> Vec<String> {
    let diff = TextDiff::from_lines(old, new);
    let mut lines = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (old_range, new_range) = (
            first.old_range().start..last.old_range().end,
            first.new_range().start..last.new_range().end,
        );
        // An empty range names the line before it (0 for an empty file), as `diff -u` does.
        let start = |range: &std::ops::Range<usize>| {
            if range.is_empty() {
                range.start
            } else {
                range.start + 1
            }
        };
        lines.push(paint(
            HUNK,
            format!(
                "@@ -{},{} +{},{} @@",
                start(&old_range),
                old_range.len(),
                start(&new_range),
                new_range.len()
            ),
        ));
        for op in &group {
            for change in diff.iter_changes(op) {
                let text = change.value().trim_end_matches(['\n', '\r']);
                lines.push(match change.tag() {
                    ChangeTag::Delete => paint(REMOVED, format!("-{text}")),
                    ChangeTag::Insert => paint(ADDED, format!("+{text}")),
                    ChangeTag::Equal => format!(" {text}"),
                });
            }
        }
    }
    if lines.is_empty() {
        return lines;
    }
    let mut shown = vec![
        paint(HUNK, format!("--- {path}")),
        paint(HUNK, format!("+++ {path}")),
    ];
    match limit {
        Some(limit) if lines.len() > limit => {
            let hidden = lines.len() - limit;
            shown.extend(lines.into_iter().take(limit));
            shown.push(paint(DIM, format!("… +{hidden} diff lines")));
        }
        _ => shown.extend(lines),
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[String]) -> String {
        let mut out = Vec::new();
        for line in lines {
            let mut stripped = anstream::StripStream::new(&mut out);
            std::io::Write::write_all(&mut stripped, line.as_bytes()).unwrap_or_default();
            out.push(b'\n');
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_change_is_a_hunk_with_its_context() {
        let old = "a\nb\nc\nd\ne\nf\n";
        let new = "a\nb\nc\nD\ne\nf\n";
        assert_eq!(
            plain(&render("x.txt", old, new, None)),
            "--- x.txt\n+++ x.txt\n@@ -2,5 +2,5 @@\n b\n c\n-d\n+D\n e\n f\n"
        );
    }

    #[test]
    fn a_new_file_is_all_additions_and_a_long_diff_is_cut_with_a_count() {
        let lines = render("new.txt", "", "1\n2\n3\n4\n", Some(3));
        assert_eq!(
            plain(&lines),
            "--- new.txt\n+++ new.txt\n@@ -0,0 +1,4 @@\n+1\n+2\n… +2 diff lines\n"
        );
    }

    #[test]
    fn no_change_is_no_diff() {
        assert!(render("same", "a\n", "a\n", None).is_empty());
    }
}
