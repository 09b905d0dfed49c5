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
mod tests {
    use super::*;
    use serde_json::json;

    const KNOWN: &[&str] = &["k"];

    #[test]
    fn tables_under_free_names_are_read_in_name_order_with_their_keys_checked() {
        let config = json!({ "servers": { "b": { "k": 1 }, "a": { "k": 2 } } });
        let table = SettingsTable::new("p", &config, &["servers"]).unwrap();
        let servers = table.tables("servers", KNOWN).unwrap();
        let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let bad = json!({ "servers": { "a": { "x": 1 } } });
        let table = SettingsTable::new("p", &bad, &["servers"]).unwrap();
        let err = table.tables("servers", KNOWN).unwrap_err().to_string();
        assert!(err.contains("servers.a") && err.contains("`x`"), "{err}");
        let bad = json!({ "servers": { "a": 1 } });
        let table = SettingsTable::new("p", &bad, &["servers"]).unwrap();
        let err = table.tables("servers", KNOWN).unwrap_err().to_string();
        assert!(err.contains("servers.a"), "{err}");
        let none = json!({});
        let table = SettingsTable::new("p", &none, &["servers"]).unwrap();
        assert!(table.tables("servers", KNOWN).unwrap().is_empty());
    }

    /// The table `{ "k": value }` of plugin `p`.
    fn with(value: Value) -> Value {
        json!({ "k": value })
    }

    fn read<T>(
        value: Value,
        get: impl FnOnce(&SettingsTable<'_>) -> Result<Option<T>, SettingsError>,
    ) -> Result<Option<T>, String> {
        let config = with(value);
        let table = SettingsTable::new("p", &config, KNOWN).map_err(String::from)?;
        get(&table).map_err(String::from)
    }

    #[test]
    fn an_absent_table_reads_as_empty_and_absent_keys_as_none() {
        let table = SettingsTable::new("p", &Value::Null, KNOWN).unwrap();
        assert_eq!(table.plugin(), "p");
        assert_eq!(table.get("k"), None);
        assert_eq!(table.string("k").unwrap(), None);
        assert_eq!(table.whole::<u32>("k").unwrap(), None);
        assert_eq!(table.table("k", &[]).unwrap().map(|_| ()), None);
        let empty = json!({});
        let table = SettingsTable::new("p", &empty, KNOWN).unwrap();
        assert_eq!(table.bool("k").unwrap(), None);
    }

    #[test]
    fn a_value_that_is_not_a_table_is_refused_naming_the_plugin_table() {
        for (config, got) in [
            (json!("x"), "\"x\""),
            (json!(3), "3"),
            (json!([1]), "[1]"),
            (json!(true), "true"),
        ] {
            let err = SettingsTable::new("web", &config, KNOWN).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("settings [plugins.web]: expected a table, got `{got}`")
            );
            assert_eq!(err.plugin(), "web");
        }
    }

    #[test]
    fn unknown_keys_are_listed_with_the_known_ones() {
        let config = json!({ "k": 1, "max_byte": 1 });
        let err = SettingsTable::new("web", &config, &["k", "max_bytes"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "settings [plugins.web]: unknown key `max_byte` (known: k, max_bytes)"
        );
        let config = json!({ "a": 1, "b": 2 });
        let err = SettingsTable::new("p", &config, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "settings [plugins.p]: unknown keys `a`, `b` (known: none)"
        );
        assert!(
            matches!(err, SettingsError::UnknownKeys { ref unknown, .. } if unknown == &["a", "b"])
        );
    }

    #[test]
    fn strings_text_and_secrets() {
        assert_eq!(read(json!(""), |t| t.string("k")), Ok(Some(String::new())));
        assert_eq!(
            read(json!(7), |t| t.string("k")),
            Err("settings [plugins.p] k: expected a string, got `7`".to_owned())
        );
        assert_eq!(
            read(json!(" a "), |t| t.text("k")),
            Ok(Some("a".to_owned()))
        );
        assert_eq!(
            read(json!("  "), |t| t.text("k")),
            Err("settings [plugins.p] k: expected a non-empty string, got `\"  \"`".to_owned())
        );
        assert_eq!(
            read(json!(" {env:KEY} "), |t| t.secret("k")),
            Ok(Some("{env:KEY}".to_owned()))
        );
        for bad in [json!(12345), json!(" "), json!(["hunter2"])] {
            let err = read(bad, |t| t.secret("k")).unwrap_err();
            assert_eq!(
                err,
                "settings [plugins.p] k: expected a non-empty string (or a secret reference such as `{env:NAME}`)"
            );
        }
    }

    #[test]
    fn booleans() {
        assert_eq!(read(json!(false), |t| t.bool("k")), Ok(Some(false)));
        assert_eq!(
            read(json!("yes"), |t| t.bool("k")),
            Err("settings [plugins.p] k: expected true or false, got `\"yes\"`".to_owned())
        );
        assert_eq!(
            read(Value::Null, |t| t.bool("k")),
            Err("settings [plugins.p] k: expected true or false, got `null`".to_owned())
        );
    }

    #[test]
    fn whole_numbers_and_their_ranges() {
        assert_eq!(read(json!(0), |t| t.whole::<u64>("k")), Ok(Some(0)));
        assert_eq!(read(json!(7), |t| t.whole::<usize>("k")), Ok(Some(7)));
        assert_eq!(read(json!(7), |t| t.positive::<u32>("k")), Ok(Some(7)));
        for (bad, got) in [
            (json!(-1), "-1"),
            (json!(1.5), "1.5"),
            (json!("3"), "\"3\""),
        ] {
            assert_eq!(
                read(bad, |t| t.whole::<u32>("k")),
                Err(format!(
                    "settings [plugins.p] k: expected a whole number, got `{got}`"
                ))
            );
        }
        assert_eq!(
            read(json!(0), |t| t.positive::<usize>("k")),
            Err("settings [plugins.p] k: expected a positive integer, got `0`".to_owned())
        );
        assert_eq!(
            read(json!(5_000_000_000_u64), |t| t.whole::<u32>("k")),
            Err("settings [plugins.p] k: expected a whole number no greater than 4294967295, got `5000000000`".to_owned())
        );
        assert_eq!(
            read(json!(256), |t| t.positive::<u8>("k")),
            Err("settings [plugins.p] k: expected a positive integer no greater than 255, got `256`".to_owned())
        );
        assert_eq!(
            read(json!(u64::MAX), |t| t.whole::<u64>("k")),
            Ok(Some(u64::MAX))
        );
    }

    #[test]
    fn durations_in_milliseconds_or_seconds() {
        assert_eq!(
            read(json!(1500), |t| t.duration("k", TimeUnit::Milliseconds)),
            Ok(Some(Duration::from_millis(1500)))
        );
        assert_eq!(
            read(json!(0), |t| t.duration("k", TimeUnit::Seconds)),
            Ok(Some(Duration::ZERO))
        );
        assert_eq!(
            read(json!(u64::MAX), |t| t
                .positive_duration("k", TimeUnit::Seconds)),
            Ok(Some(Duration::from_secs(u64::MAX)))
        );
        assert_eq!(
            read(json!(1.5), |t| t.duration("k", TimeUnit::Seconds)),
            Err("settings [plugins.p] k: expected a whole number of seconds, got `1.5`".to_owned())
        );
        assert_eq!(
            read(json!("1s"), |t| t.duration("k", TimeUnit::Milliseconds)),
            Err(
                "settings [plugins.p] k: expected a whole number of milliseconds, got `\"1s\"`"
                    .to_owned()
            )
        );
        assert_eq!(
            read(json!(0), |t| t.positive_duration("k", TimeUnit::Seconds)),
            Err(
                "settings [plugins.p] k: expected a positive whole number of seconds, got `0`"
                    .to_owned()
            )
        );
    }

    #[test]
    fn lists() {
        assert_eq!(
            read(json!(["a", "b"]), |t| t.strings("k")),
            Ok(Some(vec!["a".to_owned(), "b".to_owned()]))
        );
        assert_eq!(read(json!([]), |t| t.strings("k")), Ok(Some(Vec::new())));
        for (bad, got) in [(json!("a"), "\"a\""), (json!(["a", 1]), "[\"a\",1]")] {
            assert_eq!(
                read(bad, |t| t.strings("k")),
                Err(format!(
                    "settings [plugins.p] k: expected a list of strings, got `{got}`"
                ))
            );
        }
        assert_eq!(
            read(json!([1, 2]), |t| t
                .array("k", "a list of globs")
                .map(|a| a.map(<[Value]>::len))),
            Ok(Some(2))
        );
        assert_eq!(
            read(json!({}), |t| t
                .array("k", "a list of globs")
                .map(|a| a.map(|_| ()))),
            Err("settings [plugins.p] k: expected a list of globs, got `{}`".to_owned())
        );
        let config = with(json!([3]));
        let table = SettingsTable::new("p", &config, KNOWN).unwrap();
        let entry = &table.array("k", "a list").unwrap().unwrap()[0];
        assert_eq!(
            table.expected("k", "a path", entry).to_string(),
            "settings [plugins.p] k: expected a path, got `3`"
        );
        assert_eq!(
            table.invalid("k", "`x` is not a directory").to_string(),
            "settings [plugins.p] k: `x` is not a directory"
        );
    }

    #[test]
    fn one_of_these_words() {
        let modes = [("off", 0), ("allowlist", 1), ("arbitrary", 2)];
        assert_eq!(
            read(json!("arbitrary"), |t| t.one_of("k", &modes)),
            Ok(Some(2))
        );
        for (bad, got) in [
            (json!("on"), "\"on\""),
            (json!(3), "3"),
            (json!("Off"), "\"Off\""),
        ] {
            assert_eq!(
                read(bad, |t| t.one_of("k", &modes)),
                Err(format!(
                    "settings [plugins.p] k: expected `off`, `allowlist` or `arbitrary`, got `{got}`"
                ))
            );
        }
        assert_eq!(
            read(json!("x"), |t| t
                .one_of("k", &[("open", ()), ("trust-store", ())])),
            Err("settings [plugins.p] k: expected `open` or `trust-store`, got `\"x\"`".to_owned())
        );
        assert_eq!(
            read(json!("x"), |t| t.one_of("k", &[("only", ())])),
            Err("settings [plugins.p] k: expected `only`, got `\"x\"`".to_owned())
        );
        assert_eq!(
            read(json!("x"), |t| t.one_of::<()>("k", &[])),
            Err("settings [plugins.p] k: expected nothing, got `\"x\"`".to_owned())
        );
    }

    #[test]
    fn nested_tables_name_their_keys_dotted() {
        let config = json!({ "price": { "input": 0.5, "output": -1 } });
        let table = SettingsTable::new("providers", &config, &["price"]).unwrap();
        let price = table.table("price", &["input", "output"]).unwrap().unwrap();
        assert_eq!(
            price.read("input", "dollars", Value::as_f64).unwrap(),
            Some(0.5)
        );
        assert_eq!(
            price
                .read("output", "dollars", |v| v.as_f64().filter(|d| *d >= 0.0))
                .unwrap_err()
                .to_string(),
            "settings [plugins.providers] price.output: expected dollars, got `-1`"
        );
        assert_eq!(
            table.table("price", &["input"]).unwrap_err().to_string(),
            "settings [plugins.providers] price: unknown key `output` (known: input)"
        );
        let config = json!({ "price": 7 });
        let table = SettingsTable::new("providers", &config, &["price"]).unwrap();
        assert_eq!(
            table.table("price", &[]).unwrap_err().to_string(),
            "settings [plugins.providers] price: expected a table, got `7`"
        );
        let config = json!({ "a": { "b": { "c": "x" } } });
        let table = SettingsTable::new("p", &config, &["a"]).unwrap();
        let b = table
            .table("a", &["b"])
            .unwrap()
            .unwrap()
            .table("b", &["c"])
            .unwrap()
            .unwrap();
        assert_eq!(
            b.bool("c").unwrap_err().to_string(),
            "settings [plugins.p] a.b.c: expected true or false, got `\"x\"`"
        );
    }

    #[test]
    fn tables_of_strings() {
        assert_eq!(
            read(json!({ "A": "1", "B": "" }), |t| t.string_map("k")),
            Ok(Some(BTreeMap::from([
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), String::new())
            ])))
        );
        assert_eq!(
            read(json!({ "N": 1 }), |t| t.string_map("k")),
            Err("settings [plugins.p] k.N: expected a string, got `1`".to_owned())
        );
        assert_eq!(
            read(json!(["N"]), |t| t.string_map("k")),
            Err("settings [plugins.p] k: expected a table of strings, got `[\"N\"]`".to_owned())
        );
    }

    #[test]
    fn odd_json_never_panics_and_every_error_names_the_plugin_and_the_key() {
        let odd = [
            Value::Null,
            json!(true),
            json!(0),
            json!(-1),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(f64::MAX),
            json!(-0.0),
            json!(1e-300),
            json!(""),
            json!("\u{0}\n\u{202e}é🦀"),
            json!("{env:X}"),
            json!([]),
            json!([null, [[]], {}]),
            json!({}),
            json!({ "": { "": [] } }),
            json!({ "k": { "k": "k" } }),
        ];
        for value in &odd {
            match SettingsTable::new("p", value, KNOWN) {
                Ok(table) => drop(table.string("k")),
                Err(err) => assert!(err.to_string().starts_with("settings [plugins.p]"), "{err}"),
            }
            let config = with(value.clone());
            let table = SettingsTable::new("p", &config, KNOWN).unwrap();
            let errors = [
                table.string("k").err(),
                table.text("k").err(),
                table.secret("k").err(),
                table.bool("k").err(),
                table.whole::<u8>("k").err(),
                table.whole::<usize>("k").err(),
                table.positive::<u32>("k").err(),
                table.positive::<u64>("k").err(),
                table.duration("k", TimeUnit::Milliseconds).err(),
                table.positive_duration("k", TimeUnit::Seconds).err(),
                table.strings("k").err(),
                table.array("k", "a list").err(),
                table.one_of("k", &[("a", 1), ("b", 2)]).err(),
                table.table("k", &["k"]).err(),
                table.table("k", &[]).err(),
                table.string_map("k").err(),
                table.read("k", "anything", |_| None::<()>).err(),
            ];
            for err in errors.into_iter().flatten() {
                let text = err.to_string();
                assert!(text.starts_with("settings [plugins.p] k"), "{text}");
                assert!(!text.ends_with('.'), "{text}");
            }
        }
    }
}
