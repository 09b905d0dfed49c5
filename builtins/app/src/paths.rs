//! A request's path under its mount, decoded and checked once, and the app's file it names.
//!
//! The part after `/apps/<task>/<mount>/` is percent-decoded once; a `.` or `..` segment, an
//! encoded `/`, a backslash or a NUL byte is refused (it would leave the mount, or the
//! `proxy_to` prefix, or mean different things to different readers). A file is served only when
//! no segment of its path below the app's directory — as asked, and as its links resolve —
//! starts with a dot: `.env`, `.git/config` and the like are never served.

use std::path::{Path, PathBuf};

/// The path below a mount, as sent (`raw`, forwarded to the app's server as it is) and
/// decoded into its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rest {
    pub(crate) raw: String,
    pub(crate) segments: Vec<String>,
}

/// `raw` (the path after the mount's `/`, without the query) checked and decoded, or why it is
/// refused.
pub(crate) fn rest(raw: &str) -> Result<Rest, String> {
    let mut segments = Vec::new();
    for piece in raw.split('/') {
        let decoded = percent_encoding::percent_decode_str(piece)
            .decode_utf8()
            .map_err(|_| format!("the path `{raw}` is not UTF-8 once decoded"))?;
        if decoded == "." || decoded == ".." {
            return Err(format!(
                "the path `{raw}` leaves its app (a `{decoded}` segment)"
            ));
        }
        if decoded.contains(['/', '\\', '\0']) {
            return Err(format!(
                "the path `{raw}` holds an encoded `/`, a backslash or a NUL byte"
            ));
        }
        segments.push(decoded.into_owned());
    }
    // `a//b` and a trailing `/` leave empty segments, which name nothing.
    segments.retain(|s| !s.is_empty());
    Ok(Rest {
        raw: raw.to_owned(),
        segments,
    })
}

fn hidden(path: &Path) -> bool {
    path.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// The file `rest` names under `dir` (its `index.html` for a directory), if it is one, stays
/// inside `dir` once its links are resolved, and has no dot-file or dot-directory on its way.
pub(crate) fn static_file(dir: &Path, rest: &Rest) -> Option<PathBuf> {
    if rest.segments.iter().any(|s| s.starts_with('.')) {
        return None;
    }
    let root = std::fs::canonicalize(dir).ok()?;
    let mut path = root.clone();
    path.extend(&rest.segments);
    if path.is_dir() {
        path = path.join("index.html");
    }
    let real = std::fs::canonicalize(&path).ok()?;
    let inside = real.strip_prefix(&root).ok()?;
    (!hidden(inside) && real.is_file()).then_some(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_decoded_once_and_may_not_leave_its_mount() {
        assert_eq!(
            rest("css/site%20main.css").unwrap().segments,
            ["css", "site main.css"]
        );
        assert_eq!(rest("").unwrap().segments, Vec::<String>::new());
        for bad in [
            "../x",
            "a/../../x",
            "%2e%2e/x",
            "%2E%2E",
            ".",
            "a/%2e/b",
            "a%2fb",
            "a%5cb",
            "a%00b",
        ] {
            assert!(rest(bad).is_err(), "{bad}");
        }
        // Decoded once: `%252e%252e` is the literal `%2e%2e`, a name like any other.
        assert_eq!(rest("%252e%252e").unwrap().segments, ["%2e%2e"]);
    }

    #[test]
    fn dot_files_and_links_out_of_the_app_are_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("site");
        std::fs::create_dir_all(app.join(".git")).unwrap();
        std::fs::create_dir_all(app.join("css")).unwrap();
        std::fs::write(app.join("index.html"), "<p>hi</p>").unwrap();
        std::fs::write(app.join("css/a.css"), "p{}").unwrap();
        std::fs::write(app.join(".env"), "KEY=secret").unwrap();
        std::fs::write(app.join(".git/config"), "[core]").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "no").unwrap();
        std::os::unix::fs::symlink(app.join(".env"), app.join("env.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), app.join("out.txt")).unwrap();
        let file = |raw: &str| static_file(&app, &rest(raw).unwrap());
        assert!(file("").unwrap().ends_with("index.html"));
        assert!(file("css/a.css").is_some());
        for refused in [".env", ".git/config", "env.txt", "out.txt", "%2eenv"] {
            assert_eq!(file(refused), None, "{refused}");
        }
    }
}
