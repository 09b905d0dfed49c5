//! What a response's body is (HTML, other text, or binary) and its text: HTML converted to
//! Markdown without scripts and styles, other text decoded as it is.

use std::borrow::Cow;

/// How a body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Converted to Markdown.
    Html,
    /// Returned as it is.
    Text,
    /// Refused.
    Binary,
}

/// Elements whose content is never shown: code and styling, not text.
const SKIPPED: [&str; 4] = ["script", "style", "noscript", "template"];

/// How much of a body is looked at to tell text from binary.
const SNIFF_BYTES: usize = 8 * 1024;

/// A `Content-Type` header split into its media type (lowercase, no parameters; empty when
/// absent) and its charset, if it names one.
pub(crate) fn media_type(header: Option<&str>) -> (String, Option<String>) {
    let Some(header) = header else {
        return (String::new(), None);
    };
    let mut parts = header.split(';');
    let mime = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|part| {
        let (name, value) = part.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_owned())
    });
    (mime, charset)
}

/// Media types outside `text/` that are text.
fn is_textual(mime: &str) -> bool {
    const TEXT_TYPES: [&str; 12] = [
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
        "application/x-ndjson",
    ];
    mime.starts_with("text/")
        || TEXT_TYPES.contains(&mime)
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
}

/// Whether the start of a body looks binary: a NUL byte, or bytes that are not UTF-8 when no
/// charset says how to read them.
fn looks_binary(body: &[u8], charset: Option<&str>) -> bool {
    let head = &body[..body.len().min(SNIFF_BYTES)];
    if head.contains(&0) {
        return true;
    }
    if charset.is_some() {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        // A character cut at the end of the sniffed part is not a sign of binary.
        Err(err) => err.error_len().is_some(),
    }
}

/// How to read a body of media type `mime` (empty: none declared).
pub(crate) fn kind(mime: &str, charset: Option<&str>, body: &[u8]) -> Kind {
    match mime {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        // Undeclared or generic: look at it.
        "" | "application/octet-stream" | "binary/octet-stream" => {
            if looks_binary(body, charset) {
                Kind::Binary
            } else if looks_like_html(body) {
                Kind::Html
            } else {
                Kind::Text
            }
        }
        _ if is_textual(mime) => {
            if body.contains(&0) {
                Kind::Binary
            } else {
                Kind::Text
            }
        }
        _ => Kind::Binary,
    }
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start_matches('\u{feff}').trim_start();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

/// The body as text, in its declared charset (UTF-8 when none or an unknown one is named;
/// a byte-order mark wins); bytes that do not decode become U+FFFD.
pub(crate) fn decode<'a>(body: &'a [u8], charset: Option<&str>) -> Cow<'a, str> {
    let encoding = charset
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    text
}

/// HTML as Markdown, without the content of scripts, styles, `noscript` and templates.
pub(crate) fn html_to_markdown(html: &str) -> Result<String, String> {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build()
        .convert(html)
        .map_err(|err| format!("the HTML could not be converted: {err}"))
}

/// `text` cut to at most `max` characters, and whether it was cut.
pub(crate) fn clip(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_split_into_media_type_and_charset() {
        assert_eq!(
            media_type(Some("Text/HTML; Charset=\"ISO-8859-1\"")),
            ("text/html".to_owned(), Some("ISO-8859-1".to_owned()))
        );
        assert_eq!(
            media_type(Some("application/json")),
            ("application/json".to_owned(), None)
        );
        assert_eq!(media_type(None), (String::new(), None));
    }

    #[test]
    fn bodies_are_told_apart() {
        assert_eq!(kind("text/html", None, b"<p>x</p>"), Kind::Html);
        assert_eq!(kind("application/xhtml+xml", None, b"<p>x</p>"), Kind::Html);
        assert_eq!(kind("text/plain", None, b"hello"), Kind::Text);
        assert_eq!(kind("application/json", None, b"{}"), Kind::Text);
        assert_eq!(kind("application/vnd.api+json", None, b"{}"), Kind::Text);
        assert_eq!(kind("image/png", None, b"\x89PNG"), Kind::Binary);
        assert_eq!(kind("application/pdf", None, b"%PDF-1.7"), Kind::Binary);
        assert_eq!(kind("text/plain", None, b"a\0b"), Kind::Binary);
        assert_eq!(kind("", None, b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind("", None, b"plain words"), Kind::Text);
        assert_eq!(
            kind("application/octet-stream", None, b"\xff\xfe\xfd\x00"),
            Kind::Binary
        );
        assert_eq!(kind("", None, b"\xc3\x28 not utf-8"), Kind::Binary);
    }

    #[test]
    fn a_declared_charset_is_decoded() {
        assert_eq!(decode(b"caf\xe9", Some("iso-8859-1")), "café");
        assert_eq!(decode("café".as_bytes(), None), "café");
        assert_eq!(decode("café".as_bytes(), Some("no-such-charset")), "café");
    }

    #[test]
    fn scripts_and_styles_are_skipped_and_structure_kept() {
        let md = html_to_markdown(
            "<html><head><style>body{color:red}</style><script>alert('x')</script></head>\
             <body><h1>Title</h1><p>Hi <a href=\"https://x.example/a\">link</a></p>\
             <script>var secret = 1;</script><noscript>enable js</noscript></body></html>",
        )
        .unwrap();
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("[link](https://x.example/a)"), "{md}");
        for gone in ["alert", "color:red", "secret", "enable js"] {
            assert!(!md.contains(gone), "{gone} in {md}");
        }
    }

    #[test]
    fn clip_counts_characters() {
        assert_eq!(clip("héllo", 2), ("hé", true));
        assert_eq!(clip("héllo", 5), ("héllo", false));
    }
}
