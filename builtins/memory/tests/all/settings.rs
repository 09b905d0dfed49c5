//! `[plugins.memory]`: each settings error names the key and the value, at pack build.

use serde_json::json;

use crate::common::{Dir, session};

#[test]
fn each_settings_error_names_the_key_and_the_value() {
    let dir = Dir::new();
    let root = dir.root().to_str().unwrap().to_owned();
    let cases = [
        (
            json!({ "dir": root, "size": 3 }),
            "settings [plugins.memory]: unknown key `size` (known: dir, read_only)",
        ),
        (
            json!({ "dir": 3 }),
            "settings [plugins.memory] dir: expected a non-empty path, got `3`",
        ),
        (
            json!({ "dir": "" }),
            "settings [plugins.memory] dir: expected a non-empty path, got `\"\"`",
        ),
        (
            json!({ "dir": "relative/memories" }),
            "settings [plugins.memory] dir: `relative/memories` is not an absolute path",
        ),
        (
            json!({ "dir": root, "read_only": "yes" }),
            "settings [plugins.memory] read_only: expected true or false, got `\"yes\"`",
        ),
        (
            json!("on"),
            "settings [plugins.memory]: expected a table, got `\"on\"`",
        ),
    ];
    for (settings, wanted) in cases {
        let err = session(settings).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("plugin `memory`: session pack `memory` failed for agent `main`: {wanted}")
        );
    }
    session(json!({ "dir": root, "read_only": false })).unwrap();
}
