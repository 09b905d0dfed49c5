//! A plugin's settings table, `[plugins.<name>]`, read with typed getters whose errors name the plugin, the key and the value.
//!
//! Messages follow one form: `settings [plugins.<plugin>]: …` for the table as a whole (not a
//! table, unknown keys with the known ones listed), `settings [plugins.<plugin>] <key>: …` for
//! one value (`expected <what>, got` and the value as JSON in backticks, or the plugin's own
//! reason). A nested table's keys are dotted: `price.input`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

/// What is wrong with a plugin's settings; its `Display` form is the message a user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    /// The plugin's table (or the nested table at `key`) is not a table.
    NotATable {
        /// The plugin whose settings these are.
        plugin: String,
        /// The nested table's dotted key; `None` for the plugin's own table.
        key: Option<String>,
        /// The value given, as JSON.
        got: String,
    },
    /// The table holds keys the plugin does not know.
    UnknownKeys {
        /// The plugin whose settings these are.
        plugin: String,
        /// The nested table's dotted key; `None` for the plugin's own table.
        table: Option<String>,
        /// The keys not known, in the table's order.
        unknown: Vec<String>,
        /// The keys the table takes, in the plugin's order.
        known: Vec<String>,
    },
    /// One value is wrong.
    Invalid {
        /// The plugin whose settings these are.
        plugin: String,
        /// The dotted key of the value.
        key: String,
        /// What is wrong with it (`expected …, got `…``, or the plugin's own reason).
        problem: String,
    },
}

impl SettingsError {
    /// The plugin whose settings are wrong.
    pub fn plugin(&self) -> &str {
        match self {
            Self::NotATable { plugin, .. }
            | Self::UnknownKeys { plugin, .. }
            | Self::Invalid { plugin, .. } => plugin,
        }
    }
}

/// `settings [plugins.<plugin>]`, then ` <key>` when there is one.
fn header(f: &mut fmt::Formatter<'_>, plugin: &str, key: Option<&str>) -> fmt::Result {
    write!(f, "settings [plugins.{plugin}]")?;
    match key {
        Some(key) => write!(f, " {key}"),
        None => Ok(()),
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotATable { plugin, key, got } => {
                header(f, plugin, key.as_deref())?;
                write!(f, ": expected a table, got `{got}`")
            }
            Self::UnknownKeys {
                plugin,
                table,
                unknown,
                known,
            } => {
                header(f, plugin, table.as_deref())?;
                let noun = if unknown.len() == 1 { "key" } else { "keys" };
                let unknown: Vec<String> = unknown.iter().map(|k| format!("`{k}`")).collect();
                let known = if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                };
                write!(
                    f,
                    ": unknown {noun} {} (known: {known})",
                    unknown.join(", ")
                )
            }
            Self::Invalid {
                plugin,
                key,
                problem,
            } => {
                header(f, plugin, Some(key))?;
                write!(f, ": {problem}")
            }
        }
    }
}

impl std::error::Error for SettingsError {}

/// Plugins report settings errors as text (a pack or a tool factory fails with a string).
impl From<SettingsError> for String {
    fn from(err: SettingsError) -> Self {
        err.to_string()
    }
}

/// The unit a duration setting is written in: a whole number of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// `…_ms` settings.
    Milliseconds,
    /// `…_secs` settings.
    Seconds,
}

impl TimeUnit {
    fn name(self) -> &'static str {
        match self {
            Self::Milliseconds => "milliseconds",
            Self::Seconds => "seconds",
        }
    }

    fn duration(self, n: u64) -> Duration {
        match self {
            Self::Milliseconds => Duration::from_millis(n),
            Self::Seconds => Duration::from_secs(n),
        }
    }
}

/// An unsigned integer type a setting may be read as; values past its range are refused,
/// naming its largest value.
pub trait WholeNumber: Copy {
    /// The largest value, for the range error.
    const LARGEST: u64;
    /// `n`, when it fits.
    fn from_u64(n: u64) -> Option<Self>;
}

macro_rules! whole_number {
    ($($t:ty => $largest:expr),*) => {$(
        impl WholeNumber for $t {
            const LARGEST: u64 = $largest;
            fn from_u64(n: u64) -> Option<Self> {
                Self::try_from(n).ok()
            }
        }
    )*};
}

// Every target noeta builds for has a `usize` of at most 64 bits.
whole_number!(
    u8 => u8::MAX as u64,
    u16 => u16::MAX as u64,
    u32 => u32::MAX as u64,
    u64 => u64::MAX,
    usize => usize::MAX as u64
);

/// `` `a` ``, `` `a` or `b` ``, `` `a`, `b` or `c` ``.
fn words<'w>(choices: impl ExactSizeIterator<Item = &'w str>) -> String {
    let count = choices.len();
    let mut out = String::new();
    for (i, word) in choices.enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == count { " or " } else { ", " });
        }
        out.push('`');
        out.push_str(word);
        out.push('`');
    }
    if out.is_empty() {
        out.push_str("nothing");
    }
    out
}

/// A plugin's settings table (or a table nested in it), its keys checked against the ones the
/// plugin knows.
///
/// Each getter gives `Ok(None)` when the key is absent, the value when it is right, and an
/// error naming the plugin, the key and the value when it is not. Present keys are never
/// defaulted silently: a JSON `null` under a key is a wrong value, not an absent one.
///
/// ```
/// use std::time::Duration;
/// use noeta_toolkit::{SettingsTable, TimeUnit};
/// use serde_json::json;
///
/// let config = json!({ "max_bytes": 1000, "timeout_secs": 5 });
/// let table = SettingsTable::new("web", &config, &["max_bytes", "timeout_secs"])?;
/// let max_bytes: usize = table.positive("max_bytes")?.unwrap_or(10 * 1024 * 1024);
/// let timeout = table.positive_duration("timeout_secs", TimeUnit::Seconds)?;
/// assert_eq!((max_bytes, timeout), (1000, Some(Duration::from_secs(5))));
///
/// let config = json!({ "max_bytes": 0 });
/// let table = SettingsTable::new("web", &config, &["max_bytes"])?;
/// assert_eq!(
///     table.positive::<usize>("max_bytes").unwrap_err().to_string(),
///     "settings [plugins.web] max_bytes: expected a positive integer, got `0`"
/// );
/// # Ok::<(), noeta_toolkit::SettingsError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SettingsTable<'a> {
    plugin: &'a str,
    /// The dotted key of a nested table; `None` for the plugin's own.
    path: Option<String>,
    /// `None` when the plugin's table is absent (`null`).
    map: Option<&'a Map<String, Value>>,
}

impl<'a> SettingsTable<'a> {
    /// Reads `[plugins.<plugin>]`: `config` must be a table (or `null`, the table absent, which
    /// reads as empty) whose keys are all among `known`. Unknown keys are reported together,
    /// with the known ones listed in `known`'s order.
    pub fn new(plugin: &'a str, config: &'a Value, known: &[&str]) -> Result<Self, SettingsError> {
        let map = match config {
            Value::Null => None,
            Value::Object(map) => Some(map),
            other => {
                return Err(SettingsError::NotATable {
                    plugin: plugin.to_owned(),
                    key: None,
                    got: other.to_string(),
                });
            }
        };
        Self::checked(plugin, None, map, known)
    }

    fn checked(
        plugin: &'a str,
        path: Option<String>,
        map: Option<&'a Map<String, Value>>,
        known: &[&str],
    ) -> Result<Self, SettingsError> {
        let unknown: Vec<String> = map
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(SettingsError::UnknownKeys {
                plugin: plugin.to_owned(),
                table: path,
                unknown,
                known: known.iter().map(|k| (*k).to_owned()).collect(),
            });
        }
        Ok(Self { plugin, path, map })
    }

    /// The plugin whose settings these are.
    pub fn plugin(&self) -> &str {
        self.plugin
    }

    /// The value under `key`, as given.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key))
    }

    /// `key` as messages name it: dotted under a nested table.
    fn key_path(&self, key: &str) -> String {
        match &self.path {
            Some(path) => format!("{path}.{key}"),
            None => key.to_owned(),
        }
    }

    /// The error `settings [plugins.<plugin>] <key>: <problem>`, for a plugin's own checks.
    pub fn invalid(&self, key: &str, problem: impl fmt::Display) -> SettingsError {
        SettingsError::Invalid {
            plugin: self.plugin.to_owned(),
            key: self.key_path(key),
            problem: problem.to_string(),
        }
    }

    /// The error `settings [plugins.<plugin>] <key>: expected <expected>, got `<got>``; `got`
    /// is shown as JSON (a list's entry, say, when the list itself was fine).
    pub fn expected(&self, key: &str, expected: &str, got: &Value) -> SettingsError {
        self.invalid(key, format!("expected {expected}, got `{got}`"))
    }

    /// The value under `key` as `parse` reads it; when `parse` gives `None`, the error says
    /// `expected <expected>` and shows the value.
    pub fn read<T>(
        &self,
        key: &str,
        expected: &str,
        parse: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        parse(value)
            .map(Some)
            .ok_or_else(|| self.expected(key, expected, value))
    }

    /// Any string, as written (empty too).
    pub fn string(&self, key: &str) -> Result<Option<String>, SettingsError> {
        self.read(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    /// A string with something besides white space, trimmed.
    pub fn text(&self, key: &str) -> Result<Option<String>, SettingsError> {
        self.read(key, "a non-empty string", |v| {
            v.as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        })
    }

    /// A secret: a string with something besides white space, trimmed, as the host left it
    /// (a secret reference such as `{env:NAME}` is passed through as written). The error
    /// never shows the value.
    pub fn secret(&self, key: &str) -> Result<Option<String>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        value
            .as_str()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Some(s.to_owned()))
            .ok_or_else(|| {
                self.invalid(
                    key,
                    "expected a non-empty string (or a secret reference such as `{env:NAME}`)",
                )
            })
    }

    /// `true` or `false`.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, SettingsError> {
        self.read(key, "true or false", Value::as_bool)
    }

    fn number<T: WholeNumber>(
        &self,
        key: &str,
        least: u64,
        what: &str,
    ) -> Result<Option<T>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Some(n) = value.as_u64().filter(|n| *n >= least) else {
            return Err(self.expected(key, what, value));
        };
        match T::from_u64(n) {
            Some(n) => Ok(Some(n)),
            None => Err(self.expected(
                key,
                &format!("{what} no greater than {}", T::LARGEST),
                value,
            )),
        }
    }

    /// A whole number, zero included, within `T`'s range.
    pub fn whole<T: WholeNumber>(&self, key: &str) -> Result<Option<T>, SettingsError> {
        self.number(key, 0, "a whole number")
    }

    /// A whole number above zero, within `T`'s range.
    pub fn positive<T: WholeNumber>(&self, key: &str) -> Result<Option<T>, SettingsError> {
        self.number(key, 1, "a positive integer")
    }

    /// A duration written as a whole number of `unit` (zero included).
    pub fn duration(&self, key: &str, unit: TimeUnit) -> Result<Option<Duration>, SettingsError> {
        let what = format!("a whole number of {}", unit.name());
        Ok(self.number::<u64>(key, 0, &what)?.map(|n| unit.duration(n)))
    }

    /// A duration written as a whole number of `unit`, above zero.
    pub fn positive_duration(
        &self,
        key: &str,
        unit: TimeUnit,
    ) -> Result<Option<Duration>, SettingsError> {
        let what = format!("a positive whole number of {}", unit.name());
        Ok(self.number::<u64>(key, 1, &what)?.map(|n| unit.duration(n)))
    }

    /// A list of strings.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, SettingsError> {
        self.read(key, "a list of strings", |v| {
            v.as_array()?
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
    }

    /// A list whose entries the plugin checks itself (with [`expected`](Self::expected) or
    /// [`invalid`](Self::invalid)); when the value is not a list, the error says
    /// `expected <expected>`.
    pub fn array(&self, key: &str, expected: &str) -> Result<Option<&'a [Value]>, SettingsError> {
        self.read(key, expected, |v| v.as_array().map(Vec::as_slice))
    }

    /// One of the words of `choices`, as the value paired with it; the error lists the words.
    pub fn one_of<T: Clone>(
        &self,
        key: &str,
        choices: &[(&str, T)],
    ) -> Result<Option<T>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        if let Some(text) = value.as_str()
            && let Some((_, chosen)) = choices.iter().find(|(word, _)| *word == text)
        {
            return Ok(Some(chosen.clone()));
        }
        Err(self.expected(key, &words(choices.iter().map(|(w, _)| *w)), value))
    }

    /// A nested table whose keys are all among `known`, read with the same getters (its keys
    /// named `<key>.<inner>` in messages).
    pub fn table(
        &self,
        key: &str,
        known: &[&str],
    ) -> Result<Option<SettingsTable<'a>>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Some(map) = value.as_object() else {
            return Err(SettingsError::NotATable {
                plugin: self.plugin.to_owned(),
                key: Some(self.key_path(key)),
                got: value.to_string(),
            });
        };
        Self::checked(self.plugin, Some(self.key_path(key)), Some(map), known).map(Some)
    }

    /// A nested table of tables under names the plugin does not fix (a server per alias, say),
    /// each read with the same getters and keys among `known` (named `<key>.<name>.<inner>` in
    /// messages), in name order.
    pub fn tables(
        &self,
        key: &str,
        known: &[&str],
    ) -> Result<Vec<(String, SettingsTable<'a>)>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(Vec::new());
        };
        let Some(map) = value.as_object() else {
            return Err(SettingsError::NotATable {
                plugin: self.plugin.to_owned(),
                key: Some(self.key_path(key)),
                got: value.to_string(),
            });
        };
        map.iter()
            .map(|(name, item)| {
                let path = format!("{}.{name}", self.key_path(key));
                let Some(inner) = item.as_object() else {
                    return Err(SettingsError::NotATable {
                        plugin: self.plugin.to_owned(),
                        key: Some(path),
                        got: item.to_string(),
                    });
                };
                Ok((
                    name.clone(),
                    Self::checked(self.plugin, Some(path), Some(inner), known)?,
                ))
            })
            .collect()
    }

    /// A nested table of strings under names the plugin does not fix (environment variables,
    /// say).
    pub fn string_map(&self, key: &str) -> Result<Option<BTreeMap<String, String>>, SettingsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Some(map) = value.as_object() else {
            return Err(self.expected(key, "a table of strings", value));
        };
        map.iter()
            .map(|(name, item)| match item.as_str() {
                Some(text) => Ok((name.clone(), text.to_owned())),
                None => Err(self.expected(&format!("{key}.{name}"), "a string", item)),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

#[cfg(test)]
mod tests;
