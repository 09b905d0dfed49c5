//! The kernel's floors: its modules in layers, each importing only from its own floor and the
//! floors below it, checked by `cargo xtask tidy` as the crate layering is.
//!
//! Bottom to top: the base (canonical JSON, hashes, dates, bounded file reads, versions), the
//! store (bytes and leases), the model's wire types, the kernel's records, the fold, the plugin
//! API (the `Extension` interface, tools, contributions, the policy, providers, execution
//! environments), the hook dispatcher, the declaration half and identity (surfaces, manifests,
//! loading, trust, merging, resolution, compiled agents, sessions), and the runner. A module's
//! floor is the floor of its top-level name (`runner/claim.rs` is the runner's).

/// The floors, bottom first, each with its modules.
pub(crate) const FLOORS: &[(&str, &[&str])] = &[
    (
        "base",
        &["canonical", "dates", "files", "panics", "version"],
    ),
    ("store", &["store"]),
    ("model wire types", &["model"]),
    ("records", &["records"]),
    ("fold", &["fold"]),
    (
        "plugin API",
        &[
            "contrib",
            "exec",
            "extension",
            "policy",
            "provider",
            "sandbox",
            "tool",
            "value",
        ],
    ),
    ("dispatcher", &["hooks"]),
    (
        "declaration and identity",
        &[
            "identity",
            "loader",
            "manifest",
            "merge",
            "plugin_command",
            "resolve",
            "session",
            "surface",
            "trust",
        ],
    ),
    ("runner", &["runner"]),
];

/// The floor of module `name`: its number (0 the base) and its name.
fn floor(name: &str) -> Option<(usize, &'static str)> {
    FLOORS
        .iter()
        .enumerate()
        .find(|(_, (_, modules))| modules.contains(&name))
        .map(|(i, (floor, _))| (i, *floor))
}

/// The kernel module a source file belongs to: `src/fold.rs` is `fold`, `src/runner/claim.rs`
/// is `runner`; `None` for the crate root (`lib.rs`).
pub(crate) fn module_of(relative: &str) -> Option<&str> {
    let first = relative.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then_some(name)
}

/// The modules a line of code names through `crate::` (comments left out): `crate::fold::X`
/// and each name of `crate::{fold, model::Y}`.
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            names.extend(
                inner
                    .split(',')
                    .map(|item| {
                        item.trim()
                            .split("::")
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_owned()
                    })
                    .filter(|name| !name.is_empty()),
            );
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            names.push(name);
        }
    }
    names
}

/// The problems of one kernel source file (`relative` to `crates/noeta-core/src`, shown as
/// `shown`): a module on no floor, and each import of a higher floor's module.
pub(crate) fn problems(relative: &str, shown: &str, text: &str) -> Vec<String> {
    let Some(module) = module_of(relative) else {
        return Vec::new();
    };
    let Some((own, own_floor)) = floor(module) else {
        return vec![format!(
            "{shown}: kernel module `{module}` is on no floor; place it in xtask/src/floors.rs"
        )];
    };
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        for name in named_modules(line) {
            if let Some((theirs, their_floor)) = floor(&name)
                && theirs > own
            {
                found.push(format!(
                    "{shown}:{}: `{module}` ({own_floor}) uses `crate::{name}` ({their_floor}): a kernel floor imports only from its own and lower floors",
                    number + 1
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_from_a_higher_floor_is_caught_and_comments_and_lower_floors_are_not() {
        let fold = "//! The fold.\n\
                    use crate::model::Message;\n\
                    use crate::store::{Event, Snapshot};\n\
                    /// Made by [`crate::hooks`] for [`crate::extension::Extension`].\n\
                    use crate::extension::Extension;\n\
                    fn f() { let _ = crate::runner::SNAPSHOT_EVERY; } // crate::session\n";
        let found = problems("fold.rs", "crates/noeta-core/src/fold.rs", fold);
        assert_eq!(
            found,
            [
                "crates/noeta-core/src/fold.rs:5: `fold` (fold) uses `crate::extension` (plugin API): a kernel floor imports only from its own and lower floors",
                "crates/noeta-core/src/fold.rs:6: `fold` (fold) uses `crate::runner` (runner): a kernel floor imports only from its own and lower floors",
            ]
        );
        let grouped = problems(
            "model.rs",
            "m",
            "use crate::{canonical::Digest, tool::Attachment};\n",
        );
        assert_eq!(grouped.len(), 1, "{grouped:?}");
        assert!(
            grouped[0].contains("`crate::tool` (plugin API)"),
            "{grouped:?}"
        );
        assert!(
            problems(
                "runner/claim.rs",
                "r",
                "use crate::session::Session;\nuse super::compose;\n"
            )
            .is_empty(),
            "the runner is the top floor"
        );
        assert!(problems("lib.rs", "l", "pub mod runner;\n").is_empty());
    }

    #[test]
    fn a_module_on_no_floor_is_named() {
        let found = problems("gadgets.rs", "crates/noeta-core/src/gadgets.rs", "");
        assert_eq!(
            found,
            [
                "crates/noeta-core/src/gadgets.rs: kernel module `gadgets` is on no floor; place it in xtask/src/floors.rs"
            ]
        );
    }
}
