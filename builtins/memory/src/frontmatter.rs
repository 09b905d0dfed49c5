//! The memory file format: optional YAML frontmatter between `---` lines, then a markdown body.

use yaml_serde::{Mapping, Value};

/// The frontmatter keys the plugin knows, in the order they are written.
pub(crate) const KNOWN_KEYS: [&str; 7] = [
    "description",
    "type",
    "keywords",
    "related",
    "created",
    "updated",
    "source_task",
];

/// The values `type` may take.
pub(crate) const TYPES: [&str; 4] = ["user", "project", "procedural", "reference"];

/// One memory file, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Document {
    /// The frontmatter, every key kept (known and unknown).
    pub(crate) front: Mapping,
    /// The markdown body, without the blank lines that separate it from the frontmatter.
    pub(crate) body: String,
    /// The line of the file (from 1) the body starts on.
    pub(crate) body_line: usize,
}

/// A frontmatter split off a file's text: the YAML text, the rest, and the line the rest starts on.
fn split(text: &str) -> Option<(&str, &str, usize)> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end() != "---" || !first.ends_with('\n') {
        return None;
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    let mut line_no = 1;
    for line in lines {
        line_no += 1;
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            return Some((
                &text[yaml_start..offset],
                &text[offset + line.len()..],
                line_no + 1,
            ));
        }
        offset += line.len();
    }
    None
}

impl Document {
    /// Parses a memory file's text; a leading byte-order mark is ignored. A file without a
    /// closed `---` fence on its first line is all body.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let Some((yaml, rest, mut body_line)) = split(text) else {
            return Ok(Self {
                front: Mapping::new(),
                body: text.to_owned(),
                body_line: 1,
            });
        };
        let front = if yaml.trim().is_empty() {
            Mapping::new()
        } else {
            match yaml_serde::from_str::<Value>(yaml) {
                Ok(Value::Mapping(map)) => map,
                Ok(Value::Null) => Mapping::new(),
                Ok(_) => return Err("the frontmatter is not a mapping of keys to values".into()),
                Err(err) => return Err(format!("the frontmatter is not valid YAML: {err}")),
            }
        };
        let mut body = rest;
        while let Some(line) = body.split_inclusive('\n').next() {
            if !line.trim().is_empty() || !line.ends_with('\n') {
                break;
            }
            body = &body[line.len()..];
            body_line += 1;
        }
        Ok(Self {
            front,
            body: body.to_owned(),
            body_line,
        })
    }

    /// A frontmatter value as text: a string as it is, a number or boolean spelled out.
    pub(crate) fn text(&self, key: &str) -> Option<String> {
        match self.front.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        }
    }

    /// The description, on one line (empty when there is none).
    pub(crate) fn description(&self) -> String {
        one_line(&self.text("description").unwrap_or_default())
    }

    /// The keywords as one text: a string as it is, a list joined with `, `.
    pub(crate) fn keywords(&self) -> String {
        match self.front.get("keywords") {
            Some(Value::Sequence(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Value::String(text) => Some(text.clone()),
                    Value::Number(number) => Some(number.to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => self.text("keywords").unwrap_or_default(),
        }
    }

    /// The file's text: the frontmatter (known keys in their fixed order, then the others
    /// sorted), a blank line, the body. The same document always renders to the same bytes.
    pub(crate) fn render(&self) -> Result<String, String> {
        let mut out = String::new();
        if !self.front.is_empty() {
            let mut ordered = Mapping::new();
            for key in KNOWN_KEYS {
                if let Some(value) = self.front.get(key) {
                    ordered.insert(Value::String(key.to_owned()), value.clone());
                }
            }
            let mut others: Vec<(String, &Value, &Value)> = self
                .front
                .iter()
                .filter(|(key, _)| !key.as_str().is_some_and(|k| KNOWN_KEYS.contains(&k)))
                .map(|(key, value)| (key_text(key), key, value))
                .collect();
            others.sort_by(|a, b| a.0.cmp(&b.0));
            for (_, key, value) in others {
                ordered.insert(key.clone(), value.clone());
            }
            let yaml = yaml_serde::to_string(&Value::Mapping(ordered))
                .map_err(|err| format!("the frontmatter could not be written: {err}"))?;
            out.push_str("---\n");
            out.push_str(&yaml);
            if !yaml.ends_with('\n') {
                out.push('\n');
            }
            out.push_str("---\n");
        }
        let body = normalize_body(&self.body);
        if !body.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&body);
            out.push('\n');
        }
        Ok(out)
    }
}

/// A key as sorting compares it: a string as it is, anything else as YAML.
fn key_text(key: &Value) -> String {
    match key {
        Value::String(text) => text.clone(),
        other => yaml_serde::to_string(other).unwrap_or_default(),
    }
}

/// A body as it is written: no leading blank lines, no trailing whitespace.
pub(crate) fn normalize_body(body: &str) -> String {
    let mut rest = body;
    while let Some(line) = rest.split_inclusive('\n').next() {
        if !line.trim().is_empty() || !line.ends_with('\n') {
            break;
        }
        rest = &rest[line.len()..];
    }
    rest.trim_end().to_owned()
}

/// Text on one line: every run of whitespace becomes one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters of `text`, ending with `…` when it was cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_without_an_end_is_body() {
        let doc = Document::parse("---\nno end\n").unwrap();
        assert!(doc.front.is_empty());
        assert_eq!(doc.body, "---\nno end\n");
    }

    #[test]
    fn the_body_line_counts_the_frontmatter_and_the_blank_lines() {
        let doc = Document::parse("---\na: 1\n---\n\n\nbody\n").unwrap();
        assert_eq!(doc.body, "body\n");
        assert_eq!(doc.body_line, 6);
        let doc = Document::parse("plain\n").unwrap();
        assert_eq!(doc.body_line, 1);
    }

    #[test]
    fn clip_keeps_at_most_max_characters() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
    }
}
