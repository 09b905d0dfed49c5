//! The SKILL.md format: YAML frontmatter between `---` fences, then the markdown instructions.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use yaml_serde::Value;

/// The default `priority`: lower is listed first.
pub(crate) const DEFAULT_PRIORITY: i64 = 100;

/// The longest skill name.
pub(crate) const MAX_NAME_CHARS: usize = 64;

/// The frontmatter keys with a meaning; every other key is kept as metadata.
const KNOWN_KEYS: [&str; 8] = [
    "name",
    "description",
    "version",
    "priority",
    "disable-model-invocation",
    "user-invocable",
    "argument-hint",
    "allowed-tools",
];

/// One SKILL.md, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SkillFile {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) version: Option<String>,
    pub(crate) priority: i64,
    pub(crate) disable_model_invocation: bool,
    pub(crate) user_invocable: bool,
    pub(crate) argument_hint: Option<String>,
    /// `None` when the skill declares no `allowed-tools` (it restricts nothing).
    pub(crate) allowed_tools: Option<Vec<String>>,
    /// Every other frontmatter key, as JSON.
    pub(crate) metadata: BTreeMap<String, Json>,
    /// The instructions after the frontmatter.
    pub(crate) body: String,
}

/// The frontmatter split off the text: the YAML and the rest.
fn split(text: &str) -> Result<(&str, &str), String> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err("SKILL.md does not start with a `---` frontmatter fence".to_owned());
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            return Ok((&text[start..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("the frontmatter has no closing `---` fence".to_owned())
}

/// A scalar as text: a string as it is, a number or boolean spelled out.
pub(crate) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// How a value is shown in a reason.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(_) => "a tagged value".to_owned(),
        other => format!("`{}`", scalar(other).unwrap_or_default()),
    }
}

fn flag(key: &str, value: Option<&Value>, default: bool) -> Result<bool, String> {
    match value {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(other) => Err(format!(
            "`{key}` must be true or false, got {}",
            shown(other)
        )),
    }
}

fn text_key(key: &str, value: Option<&Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        // A flow list of text is kept as written (`argument-hint: [version]`), as Claude Code
        // keeps it.
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| match item {
                Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) | Value::Null => None,
                other => scalar(other),
            })
            .collect::<Option<Vec<_>>>()
            .map(|items| Some(format!("[{}]", items.join(", "))))
            .ok_or_else(|| {
                format!(
                    "`{key}` must be text, got {}",
                    shown(value.unwrap_or(&Value::Null))
                )
            }),
        Some(Value::Mapping(_) | Value::Tagged(_)) => Err(format!(
            "`{key}` must be text, got {}",
            shown(value.unwrap_or(&Value::Null))
        )),
        Some(other) => Ok(scalar(other)),
    }
}

/// `allowed-tools`: a block or flow list of names, or one comma-separated string.
fn allowed_tools(value: Option<&Value>) -> Result<Option<Vec<String>>, String> {
    let split_commas = |text: &str| -> Vec<String> {
        text.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    };
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(split_commas(text))),
        Some(Value::Sequence(items)) => {
            let mut tools = Vec::new();
            for item in items {
                match item {
                    Value::String(text) => tools.extend(split_commas(text)),
                    other => {
                        return Err(format!(
                            "`allowed-tools` must list tool names, but one item is {}",
                            shown(other)
                        ));
                    }
                }
            }
            Ok(Some(tools))
        }
        Some(other) => Err(format!(
            "`allowed-tools` must be a list of tool names or a comma-separated string, got {}",
            shown(other)
        )),
    }
}

/// Whether `name` is a valid skill name: lowercase letters, digits and hyphens, starting with a
/// letter or digit, at most [`MAX_NAME_CHARS`].
pub(crate) fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= MAX_NAME_CHARS
}

impl SkillFile {
    /// Parses a SKILL.md's text (a leading byte-order mark is ignored); the error is the reason
    /// the skill is skipped.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let (yaml, rest) = split(text)?;
        let front = match yaml_serde::from_str::<Value>(yaml) {
            Ok(Value::Mapping(map)) => map,
            Ok(Value::Null) => yaml_serde::Mapping::new(),
            Ok(_) => return Err("the frontmatter is not a mapping of keys to values".to_owned()),
            Err(err) => return Err(format!("the frontmatter is not valid YAML: {err}")),
        };
        let mut keyed: BTreeMap<String, Value> = BTreeMap::new();
        for (key, value) in front {
            let Value::String(key) = key else {
                return Err(format!("the frontmatter key {} is not text", shown(&key)));
            };
            keyed.insert(key, value);
        }
        let name = match keyed.get("name") {
            None | Some(Value::Null) => return Err("the frontmatter has no `name`".to_owned()),
            Some(Value::String(name)) => name.trim().to_owned(),
            Some(other) => return Err(format!("`name` must be text, got {}", shown(other))),
        };
        if name.is_empty() || name.contains('\n') {
            return Err(format!("`name` must be one line of text, got {name:?}"));
        }
        let description = text_key("description", keyed.get("description"))?
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
            .ok_or_else(|| "the frontmatter has no `description`".to_owned())?;
        let priority = match keyed.get("priority") {
            None | Some(Value::Null) => DEFAULT_PRIORITY,
            Some(value) => scalar(value)
                .and_then(|t| t.trim().parse::<i64>().ok())
                .ok_or_else(|| format!("`priority` must be an integer, got {}", shown(value)))?,
        };
        let mut metadata = BTreeMap::new();
        for (key, value) in &keyed {
            if KNOWN_KEYS.contains(&key.as_str()) {
                continue;
            }
            let json = serde_json::to_value(value)
                .map_err(|err| format!("the frontmatter key `{key}` cannot be kept: {err}"))?;
            metadata.insert(key.clone(), json);
        }
        Ok(Self {
            name,
            description,
            version: text_key("version", keyed.get("version"))?,
            priority,
            disable_model_invocation: flag(
                "disable-model-invocation",
                keyed.get("disable-model-invocation"),
                false,
            )?,
            user_invocable: flag("user-invocable", keyed.get("user-invocable"), true)?,
            argument_hint: text_key("argument-hint", keyed.get("argument-hint"))?,
            allowed_tools: allowed_tools(keyed.get("allowed-tools"))?,
            metadata,
            body: rest.trim_start_matches(['\n', '\r']).to_owned(),
        })
    }
}

impl SkillFile {
    /// The skill's id and, when its `name` is not an id (a display name such as `Skill
    /// Development`), that name: the id is then the directory's name.
    pub(crate) fn id(&self, dir_name: &str) -> Result<(String, Option<String>), String> {
        if valid_name(&self.name) {
            return Ok((self.name.clone(), None));
        }
        if valid_name(dir_name) {
            return Ok((dir_name.to_owned(), Some(self.name.clone())));
        }
        Err(format!(
            "neither the name `{}` nor the directory name `{dir_name}` is a valid skill id: use lowercase letters, digits and hyphens, starting with a letter or digit, at most {MAX_NAME_CHARS} characters",
            self.name
        ))
    }
}

/// `text` on one line: every run of whitespace becomes one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["a", "pdf", "make-release-2", "0day"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "-a", "A", "a_b", "a b", "é", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_body_follows_the_fence() {
        let f = SkillFile::parse("---\nname: a\ndescription: d\n---\n\nBody\n").unwrap();
        assert_eq!(f.body, "Body\n");
        assert_eq!(f.priority, DEFAULT_PRIORITY);
        assert!(f.user_invocable);
        assert!(!f.disable_model_invocation);
    }

    // A SKILL.md of any text — arbitrary, a frontmatter of its keys, or a valid one changed —
    // is read or refused with a reason; it never panics. Inputs that once broke the parser are
    // kept in `proptest-regressions/`.
    mod props {
        use noeta_testkit::fuzz;
        use proptest::prelude::*;

        use super::SkillFile;

        const VALID: &str = "---\nname: pdf\ndescription: Reads and fills PDF forms.\nallowed-tools: Read, Bash(python *)\npriority: 5\n---\nRun `scripts/fill.py`.\n";

        fn check(text: &str) -> Result<(), TestCaseError> {
            if let Err(reason) = SkillFile::parse(text) {
                prop_assert!(!reason.is_empty());
            }
            Ok(())
        }

        #[test]
        fn the_valid_file_the_changes_start_from_is_valid() {
            assert_eq!(
                SkillFile::parse(VALID).map(|f| f.name),
                Ok("pdf".to_owned())
            );
        }

        proptest! {
            #![proptest_config(fuzz::config())]

            #[test]
            fn any_text_is_read_or_refused(text in fuzz::any_text()) {
                check(&text)?;
            }

            #[test]
            fn a_frontmatter_of_its_keys_is_read_or_refused(text in fuzz::frontmatter_doc(&super::super::KNOWN_KEYS)) {
                check(&text)?;
            }

            #[test]
            fn a_valid_file_changed_is_read_or_refused(text in fuzz::mutated(VALID.to_owned())) {
                check(&text)?;
            }
        }
    }
}
