//! Generators for the parsers' property tests: text of every kind, and documents shaped like
//! the files a user writes (TOML, a YAML frontmatter over Markdown) whose keys come from the
//! parser's own vocabulary, so the cases reach past the first syntax error.
//!
//! A parser's property is always the same: whatever the text, it answers `Ok` or an error, and
//! never panics. `PROPTEST_CASES` raises the number of cases (2,048 by default here).

use proptest::prelude::*;
use proptest::test_runner::Config;

/// The cases each parser's property runs: `PROPTEST_CASES`, else 2,048.
#[must_use]
pub fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(2_048);
    Config {
        cases,
        ..Config::default()
    }
}

/// Any text: arbitrary Unicode, and printable ASCII with line breaks (closer to a file).
pub fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~\t\n\r]{0,300}",
        prop::collection::vec(any::<u8>(), 0..200)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

/// A TOML value, well formed or not: strings of every quoting, extreme numbers, `nan`, dates,
/// arrays and inline tables (nested once), and broken pieces.
pub fn toml_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ._/:@<>=^~*-]{0,24}".prop_map(|s| format!("\"{s}\"")),
        "[a-zA-Z0-9 .{}-]{0,12}".prop_map(|s| format!("'{s}'")),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| format!("{n:?}")),
        prop::sample::select(vec![
            "true",
            "false",
            "nan",
            "+inf",
            "-inf",
            "0x1F",
            "1e400",
            "1979-05-27T07:32:00Z",
            "1979-05-27",
            "\"\"\"\nmulti\n\"\"\"",
            "\"unterminated",
            "[",
            "{",
            "=",
            "\"\\u0000\"",
            "\"\\uD800\"",
            "18446744073709551616",
            "\"*\"",
            "\"${NAME}\"",
            "\"{env:HOME}\"",
        ])
        .prop_map(str::to_owned),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(("[a-z_-]{1,10}", inner), 0..3).prop_map(|v| {
                let pairs: Vec<String> = v.into_iter().map(|(k, x)| format!("{k} = {x}")).collect();
                format!("{{ {} }}", pairs.join(", "))
            }),
        ]
    })
}

/// A TOML document of lines made of `keys` (also dotted and quoted), `tables` (as `[t]` and
/// `[[t]]`), values from [`toml_value`], and the odd line of noise.
pub fn toml_doc(
    keys: &'static [&'static str],
    tables: &'static [&'static str],
) -> impl Strategy<Value = String> {
    let key = prop_oneof![
        prop::sample::select(keys).prop_map(str::to_owned),
        (prop::sample::select(keys), prop::sample::select(keys))
            .prop_map(|(a, b)| format!("{a}.{b}")),
        "[a-z_-]{1,12}",
        prop::sample::select(keys).prop_map(|k| format!("\"{k}\"")),
    ];
    let line = prop_oneof![
        4 => (key, toml_value()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => prop::sample::select(tables).prop_map(|t| format!("[{t}]")),
        1 => prop::sample::select(tables).prop_map(|t| format!("[[{t}]]")),
        1 => "[ -~]{0,30}",
    ];
    prop::collection::vec(line, 0..16).prop_map(|lines| lines.join("\n"))
}

/// A YAML value for a frontmatter: scalars of every quoting, lists, maps, anchors, aliases,
/// tags and broken pieces.
pub fn yaml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ._,/()*-]{0,30}",
        "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("\"{s}\"")),
        "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("'{s}'")),
        any::<i64>().prop_map(|n| n.to_string()),
        prop::collection::vec("[a-zA-Z0-9*() ]{0,10}", 0..4)
            .prop_map(|v| format!("[{}]", v.join(", "))),
        prop::collection::vec("[a-zA-Z0-9 ]{0,10}", 1..4).prop_map(|v| format!(
            "\n{}",
            v.iter().map(|x| format!("  - {x}")).collect::<String>()
        )),
        prop::sample::select(vec![
            "true",
            "null",
            "~",
            "|\n  block\n  text",
            ">\n  folded",
            "&a x",
            "*a",
            "!!binary aGk=",
            "{a: 1, b: [2]}",
            "[unclosed",
            "{",
            "\"unterminated",
            "- a\n- b",
            ": :",
            "\t",
            "?",
            "!!int 99999999999999999999",
            "*undefined",
            "<<: *a",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A Markdown file that may open with a YAML frontmatter of `keys` (`---` fences, sometimes
/// unclosed), then a body.
pub fn frontmatter_doc(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    let key = prop_oneof![
        3 => prop::sample::select(keys).prop_map(str::to_owned),
        1 => "[a-z_-]{1,12}",
    ];
    let entry = (key, yaml_value()).prop_map(|(k, v)| format!("{k}: {v}"));
    (
        prop::sample::select(vec!["---\n", "---\r\n", "\u{feff}---\n", "--- \n", ""]),
        prop::collection::vec(entry, 0..8),
        prop::sample::select(vec!["\n---\n", "\r\n---\r\n", "\n---", "\n", "\n...\n"]),
        "[ -~\n]{0,80}",
    )
        .prop_map(|(open, entries, close, body)| {
            format!("{open}{}{close}{body}", entries.join("\n"))
        })
}

/// `text` with one piece cut out and another put in at a character boundary: near-misses of a
/// valid file.
pub fn mutated(text: String) -> impl Strategy<Value = String> {
    let len = text.chars().count();
    (
        0..=len,
        0..=len.min(8),
        any_text().prop_map(|s| s.chars().take(6).collect::<String>()),
    )
        .prop_map(move |(at, cut, put)| {
            let chars: Vec<char> = text.chars().collect();
            let end = (at + cut).min(chars.len());
            let mut out: String = chars[..at].iter().collect();
            out.push_str(&put);
            out.extend(&chars[end..]);
            out
        })
}
