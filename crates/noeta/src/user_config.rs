//! A Claude Code plugin's `userConfig`: the options its `plugin.json` declares, their values
//! from the settings (`[plugins.<plugin>.config]`), and `${user_config.KEY}` substituted the
//! Claude Code way.
//!
//! ```toml
//! [plugins.crm.config]
//! endpoint = "https://crm.example/api"     # an option as it is
//! token = "{env:CRM_TOKEN}"                # a sensitive one: a secret reference
//! ```
//!
//! Every option is exported to the plugin's hook commands as `CLAUDE_PLUGIN_OPTION_<KEY>`
//! (the key upper-cased). In a hook command a sensitive option's `${user_config.KEY}` becomes
//! `${CLAUDE_PLUGIN_OPTION_KEY}`, expanded by the shell from that variable, so the secret
//! never stands in a command that is shown or recorded; other options are written in. In MCP
//! server specs every option is written in as the settings give it — a secret reference stays
//! a reference, resolved when the server starts (only a value that is the reference alone is
//! one, so a sensitive option inside a longer string, `Bearer ${user_config.token}`, is one
//! warning). Markdown commands get the options that are
//! not sensitive. An option with no value and no default is an empty string and one warning.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

/// One option a plugin's `userConfig` declares.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UserOption {
    /// `title`.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `sensitive`: a secret, given as a secret reference and never written into a command.
    pub sensitive: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `required`.
    pub required: bool,
}

/// Reads `userConfig` of `manifest` (the `plugin.json` at `file`); an error names the field.
pub(crate) fn parse(manifest: &Value, file: &Path) -> Result<BTreeMap<String, UserOption>, String> {
    let table = match manifest.get("userConfig") {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(table)) => table,
        Some(_) => {
            return Err(format!(
                "{}: `userConfig` must be an object of options",
                file.display()
            ));
        }
    };
    let mut options = BTreeMap::new();
    for (key, spec) in table {
        let at = |field: &str, what: &str| {
            format!(
                "{}: `userConfig.{key}{field}` must be {what}",
                file.display()
            )
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{}: `userConfig.{key}`: an option's key is letters, digits and `_` (it names \
                 the variable CLAUDE_PLUGIN_OPTION_<KEY>)",
                file.display()
            ));
        }
        let Value::Object(spec) = spec else {
            return Err(at(
                "",
                "an object (`type`, `title`, `description`, `sensitive`, …)",
            ));
        };
        let text = |field: &str| match spec.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(at(&format!(".{field}"), "text")),
        };
        let flag = |field: &str| match spec.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(at(&format!(".{field}"), "true or false")),
        };
        text("type")?;
        let default = match spec.get("default") {
            None | Some(Value::Null) => None,
            Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                Some(value.clone())
            }
            Some(_) => return Err(at(".default", "text, a number or true/false")),
        };
        options.insert(
            key.clone(),
            UserOption {
                title: text("title")?,
                description: text("description")?,
                sensitive: flag("sensitive")?,
                default,
                required: flag("required")?,
            },
        );
    }
    Ok(options)
}

/// A plugin's option values, as the settings give them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserValues {
    /// By key: the value as written (a secret reference for a sensitive option), and whether
    /// it is sensitive.
    values: BTreeMap<String, (String, bool)>,
}

/// The variable a hook command finds option `key` in.
pub fn env_name(key: &str) -> String {
    format!("CLAUDE_PLUGIN_OPTION_{}", key.to_ascii_uppercase())
}

impl UserValues {
    /// The values of `options` in `params` (the plugin's `[plugins.<plugin>]` table: its
    /// `config`), with the warnings to give once: an option with no value, a sensitive one
    /// given as it is rather than as a secret reference.
    pub fn read(
        plugin: &str,
        options: &BTreeMap<String, UserOption>,
        params: &Value,
    ) -> (Self, Vec<String>) {
        let config = params.get("config");
        let mut values = BTreeMap::new();
        let mut warnings = Vec::new();
        for (key, option) in options {
            let given = config.and_then(|c| c.get(key)).filter(|v| !v.is_null());
            let value = match given.or(option.default.as_ref()) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => {
                    warnings.push(format!(
                        "plugin `{plugin}`: userConfig option `{key}` has no value; set it as \
                         [plugins.{plugin}.config] {key} = … (it is empty until then)"
                    ));
                    String::new()
                }
            };
            if option.sensitive && given.is_some() && !crate::secrets::is_secret_ref(&value) {
                warnings.push(format!(
                    "plugin `{plugin}`: userConfig option `{key}` is sensitive: give it as a \
                     secret reference (`{{env:NAME}}` or `{{keyring:service/user}}`) rather than \
                     in a settings file"
                ));
            }
            values.insert(key.clone(), (value, option.sensitive));
        }
        (Self { values }, warnings)
    }

    /// Whether the plugin declares no option.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every `${user_config.KEY}` replaced by `value(key, value, sensitive)`; an
    /// unknown key is left as written.
    fn replace(&self, text: &str, value: &dyn Fn(&str, &str, bool) -> String) -> String {
        if !text.contains("${user_config.") {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("${user_config.") {
            out.push_str(&rest[..at]);
            let tail = &rest[at + "${user_config.".len()..];
            match tail.find('}') {
                Some(end) if self.values.contains_key(&tail[..end]) => {
                    let key = &tail[..end];
                    let (given, sensitive) = &self.values[key];
                    out.push_str(&value(key, given, *sensitive));
                    rest = &tail[end + 1..];
                }
                _ => {
                    out.push_str("${user_config.");
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// `text` of an MCP server spec: every option as the settings give it.
    pub fn in_spec(&self, text: &str) -> String {
        self.replace(text, &|_, given, _| given.to_owned())
    }

    /// The sensitive options `text` holds inside a longer string: a secret reference is
    /// resolved only when it is the whole value, so such a one stays unresolved.
    pub fn sensitive_inside(&self, text: &str) -> Vec<String> {
        let keys = std::cell::RefCell::new(Vec::new());
        let whole = self.replace(text, &|key, _, sensitive| {
            if sensitive {
                keys.borrow_mut().push(key.to_owned());
            }
            String::new()
        });
        let keys = keys.into_inner();
        // `text` is exactly one placeholder when nothing else is left of it.
        if keys.len() == 1 && whole.is_empty() {
            return Vec::new();
        }
        keys
    }

    /// `text` of a markdown command: the options that are not sensitive (a sensitive one is
    /// left as written).
    pub fn in_content(&self, text: &str) -> String {
        self.replace(text, &|key, given, sensitive| {
            if sensitive {
                format!("${{user_config.{key}}}")
            } else {
                given.to_owned()
            }
        })
    }

    /// `text` of a hook command: a sensitive option as the shell variable holding it.
    pub fn in_command(&self, text: &str) -> String {
        self.replace(text, &|key, given, sensitive| {
            if sensitive {
                format!("${{{}}}", env_name(key))
            } else {
                given.to_owned()
            }
        })
    }

    /// Every option as the variables a hook command gets (`CLAUDE_PLUGIN_OPTION_<KEY>`), as
    /// written: a secret reference is resolved when the session is built.
    pub fn env(&self) -> Map<String, Value> {
        self.values
            .iter()
            .map(|(key, (given, _))| (env_name(key), Value::String(given.clone())))
            .collect()
    }

    /// The options that are not sensitive, by key (for markdown commands).
    pub fn public(&self) -> Map<String, Value> {
        self.values
            .iter()
            .filter(|(_, (_, sensitive))| !sensitive)
            .map(|(key, (given, _))| (key.clone(), Value::String(given.clone())))
            .collect()
    }

    /// A plugin's hooks (Claude Code's `hooks` object) with the options applied: each command
    /// rewritten by [`Self::in_command`] and given the options' variables (`env`).
    pub fn in_hooks(&self, hooks: &Value) -> Value {
        let mut hooks = hooks.clone();
        let env = self.env();
        for groups in hooks
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            for_each_hook(groups, &mut |hook| {
                if let Some(Value::String(command)) = hook.get_mut("command") {
                    *command = self.in_command(command);
                }
                if let Value::Object(hook) = hook {
                    hook.insert("env".to_owned(), Value::Object(env.clone()));
                }
            });
        }
        hooks
    }
}

/// Calls `f` with every hook of an event's groups (Claude Code's `[{matcher, hooks: [...]}]`).
pub(crate) fn for_each_hook(groups: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    for group in groups.as_array_mut().into_iter().flatten() {
        for hook in group
            .get_mut("hooks")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            f(hook);
        }
    }
}
