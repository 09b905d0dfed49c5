//! Named extensions: the finer-grained names seed 003 gives parts of a plugin (`hooks`,
//! `permissions`, `compaction`, …), addressable like plugins in `[plugins.<name>]` and in an
//! agent's `add_plugins = [{ hooks = { … } }]`. Each one's table is a slice of its plugin's
//! parameters; [`fold`] moves it there when an agent's options are settled, so the plugin reads
//! it as its own and pins it with the rest of its parameters.
//!
//! | name | plugin | its table becomes |
//! |---|---|---|
//! | `permissions` | governance | governance's own keys (`permission_mode`, `allow`, `deny`, `edit_tools`) |
//! | `hooks` | governance | `hooks` (the events) |
//! | `budget` | governance | `budget` |
//! | `repetition_guard` | governance | `repetition` |
//! | `compaction` | react | `compaction_<key>` (`reserve_tokens`); `enabled = false` is `compaction = false` |
//! | `structured_output` | react | `structured_output_<key>` (`schema`) |
//! | `tool_search`, `recall_history` | react | react's own keys |
//! | `instructions`, `environment` | workspace | workspace's own keys |
//! | `markdown_commands` | skills | skills' own keys |
//! | `subagents` | delegation | delegation's own keys |
//!
//! `enabled = false` switches off `hooks`, `budget` and `repetition_guard` (their slice is
//! dropped) and `compaction`; the others are parts their plugin cannot run without.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::layers::merge_value;

/// Where a named extension's table goes in its plugin's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slice {
    /// Under one key.
    Key(&'static str),
    /// Its keys among the plugin's own.
    Merge,
    /// Each key `k` as `<prefix>k`; `enabled = false` sets `<switch> = false`.
    Prefix {
        prefix: &'static str,
        switch: Option<&'static str>,
    },
}

/// Every named extension: its name, its plugin and its slice.
const NAMED: [(&str, &str, Slice); 12] = [
    ("permissions", "governance", Slice::Merge),
    ("hooks", "governance", Slice::Key("hooks")),
    ("budget", "governance", Slice::Key("budget")),
    ("repetition_guard", "governance", Slice::Key("repetition")),
    (
        "compaction",
        "react",
        Slice::Prefix {
            prefix: "compaction_",
            switch: Some("compaction"),
        },
    ),
    (
        "structured_output",
        "react",
        Slice::Prefix {
            prefix: "structured_output_",
            switch: None,
        },
    ),
    ("tool_search", "react", Slice::Merge),
    ("recall_history", "react", Slice::Merge),
    ("instructions", "workspace", Slice::Merge),
    ("environment", "workspace", Slice::Merge),
    ("markdown_commands", "skills", Slice::Merge),
    ("subagents", "delegation", Slice::Merge),
];

/// The plugin a named extension belongs to (`None` for a name that is no named extension).
pub fn plugin_of(name: &str) -> Option<&'static str> {
    NAMED
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, plugin, _)| *plugin)
}

/// Every named extension's name, sorted.
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<&str> = NAMED.iter().map(|(n, _, _)| *n).collect();
    names.sort_unstable();
    names
}

/// Whether `enabled = false` on `name`'s table switches that part off by itself.
pub fn may_switch_off(name: &str) -> bool {
    NAMED.iter().any(|(n, _, slice)| {
        *n == name
            && matches!(
                slice,
                Slice::Key(_)
                    | Slice::Prefix {
                        switch: Some(_),
                        ..
                    }
            )
    })
}

/// Moves each named extension's parameters into its plugin's (`config` by plugin name): the
/// named extensions switched off (`off`) lose their slice, and a named extension in `plugins`
/// (an agent's `add_plugins`) activates its plugin instead.
pub fn fold(
    config: &mut BTreeMap<String, Value>,
    plugins: &mut Vec<String>,
    off: &dyn Fn(&str) -> bool,
) {
    for (name, plugin, slice) in NAMED {
        let params = config.remove(name);
        let target = config
            .entry(plugin.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let Value::Object(target) = target else {
            continue;
        };
        if off(name) {
            match slice {
                Slice::Key(key) => {
                    target.remove(key);
                }
                Slice::Prefix {
                    switch: Some(switch),
                    ..
                } => {
                    target.insert(switch.to_owned(), Value::Bool(false));
                }
                _ => {}
            }
        } else if let Some(Value::Object(params)) = params {
            match slice {
                Slice::Key(key) => merge_value(
                    target.entry(key.to_owned()).or_insert(Value::Null),
                    Value::Object(params),
                ),
                Slice::Merge => {
                    for (key, value) in params {
                        merge_value(target.entry(key).or_insert(Value::Null), value);
                    }
                }
                Slice::Prefix { prefix, .. } => {
                    for (key, value) in params {
                        merge_value(
                            target
                                .entry(format!("{prefix}{key}"))
                                .or_insert(Value::Null),
                            value,
                        );
                    }
                }
            }
        }
        if target.is_empty() {
            config.remove(plugin);
        }
        if let Some(at) = plugins.iter().position(|p| p == name) {
            if plugins.iter().any(|p| p == plugin) {
                plugins.remove(at);
            } else {
                plugins[at] = plugin.to_owned();
            }
        }
    }
}
