//! Settings values merged layer over layer (machine, user, project, flags; a plugin's table
//! over another's slice): objects key by key, anything else replaced.

use serde_json::{Map, Value};

/// Merges `later` over `base` key by key: objects recursively, anything else replaces.
pub(crate) fn merge_params(base: &mut Map<String, Value>, later: Map<String, Value>) {
    for (key, value) in later {
        match base.get_mut(&key) {
            Some(existing) => merge_value(existing, value),
            None => {
                base.insert(key, value);
            }
        }
    }
}

/// Merges `later` over `base`: two objects key by key, otherwise `later` replaces `base`.
pub(crate) fn merge_value(base: &mut Value, later: Value) {
    match (base, later) {
        (Value::Object(base), Value::Object(later)) => merge_params(base, later),
        (base, later) => *base = later,
    }
}
