//! The merge: every loaded contribution, collision-checked by its surface's key and ordered by its surface's rule.
//!
//! Runs no plugin code. Plugins are walked in name order and contributions in
//! manifest order, so the result — and which plugin an error names first —
//! never depends on discovery order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Value, json};

use crate::loader::PluginSet;
use crate::manifest::ManifestContribution;
use crate::surface::{CollisionKey, SurfaceOrder};

/// One contribution in the merged order.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedEntry {
    /// The contributing plugin.
    pub plugin: String,
    /// The contribution.
    pub contribution: ManifestContribution,
}

/// Every loaded contribution by surface, each surface in its order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    by_surface: BTreeMap<String, Vec<MergedEntry>>,
    tool_surfaces: BTreeSet<String>,
}

impl Merged {
    /// Surfaces with at least one contribution, sorted.
    pub fn surfaces(&self) -> impl Iterator<Item = &str> {
        self.by_surface.keys().map(String::as_str)
    }

    /// The contributions to one surface, in its order.
    pub fn for_surface(&self, surface: &str) -> &[MergedEntry] {
        self.by_surface.get(surface).map_or(&[], Vec::as_slice)
    }

    /// Every entry, surface by surface.
    pub fn entries(&self) -> impl Iterator<Item = &MergedEntry> {
        self.by_surface.values().flatten()
    }

    /// The listing locked by the built-ins' golden: surface → ordered entries.
    pub fn to_json(&self) -> Value {
        let surfaces: serde_json::Map<String, Value> = self
            .by_surface
            .iter()
            .map(|(surface, entries)| {
                let mounts = self.tool_surfaces.contains(surface);
                let list = entries.iter().map(|e| entry_json(e, mounts)).collect();
                (surface.clone(), Value::Array(list))
            })
            .collect();
        Value::Object(surfaces)
    }
}

/// One contribution as listings print it.
pub fn entry_json(entry: &MergedEntry, mounts_tools: bool) -> Value {
    let mut object = contribution_json(&entry.contribution, mounts_tools);
    if let Some(map) = object.as_object_mut() {
        map.insert("plugin".to_owned(), json!(entry.plugin));
    }
    object
}

/// A contribution as listings print it: name, ref or path, params, and (on surfaces that
/// mount tools) the model-visible tool names it mounts.
pub fn contribution_json(c: &ManifestContribution, mounts_tools: bool) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("name".to_owned(), json!(c.name));
    if let Some(r) = &c.reference {
        map.insert("ref".to_owned(), json!(r));
    }
    if let Some(p) = &c.path {
        map.insert("path".to_owned(), json!(p));
    }
    if mounts_tools {
        map.insert("tools".to_owned(), json!(c.tool_names()));
    }
    for (k, v) in &c.params {
        if k != "tools" {
            map.insert(k.clone(), v.clone());
        }
    }
    Value::Object(map)
}

/// Two contributions that clash on a surface's collision key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// The surface.
    pub surface: String,
    /// The collision key.
    pub key: CollisionKey,
    /// The clashing value of the key (empty for single-valued surfaces).
    pub value: String,
    /// The plugin earlier in name order.
    pub first: String,
    /// The other plugin.
    pub second: String,
}

impl fmt::Display for Collision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (surface, value, a, b) = (&self.surface, &self.value, &self.first, &self.second);
        match self.key {
            CollisionKey::SingleValued => write!(
                f,
                "surface `{surface}` is single-valued but contributed by both plugin `{a}` and plugin `{b}` — no override"
            ),
            CollisionKey::Kind => write!(
                f,
                "content kind `{value}` on surface `{surface}` is contributed by both plugin `{a}` and plugin `{b}` — no override"
            ),
            CollisionKey::Alias => write!(
                f,
                "mcp alias `{value}` on surface `{surface}` is contributed by both plugin `{a}` and plugin `{b}` — no override"
            ),
            CollisionKey::Name if surface == "tool-name" => write!(
                f,
                "model-visible tool `{value}` is mounted by both plugin `{a}` and plugin `{b}` — no override"
            ),
            CollisionKey::Name | CollisionKey::None => write!(
                f,
                "{surface} `{value}` is contributed by both plugin `{a}` and plugin `{b}` — no override"
            ),
        }
    }
}

/// Every collision found by one merge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.collisions.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct MergeError {
    /// The collisions, in merge order.
    pub collisions: Vec<Collision>,
}

impl PluginSet {
    /// Collision-checks and orders every loaded contribution. Runs no plugin code.
    pub fn merged(&self) -> Result<Merged, MergeError> {
        let mut by_surface: BTreeMap<String, Vec<MergedEntry>> = BTreeMap::new();
        let mut owners: BTreeMap<(String, String), String> = BTreeMap::new();
        // Model-visible tool names declared by tool and control_tool contributions share one namespace.
        let mut tool_owners: BTreeMap<String, (String, String, String)> = BTreeMap::new();
        let mut collisions = Vec::new();

        for plugin in self.plugins.values() {
            let name = plugin.name();
            for c in &plugin.manifest.contributions {
                let Ok(spec) = self.registry.get(&c.surface) else {
                    continue; // checked when the manifest was read
                };
                let key = match spec.collision() {
                    CollisionKey::None => None,
                    CollisionKey::SingleValued => Some(String::new()),
                    CollisionKey::Name | CollisionKey::Kind | CollisionKey::Alias => {
                        Some(c.name.clone())
                    }
                };
                if let Some(key) = key {
                    match owners.get(&(c.surface.clone(), key.clone())) {
                        Some(first) => collisions.push(Collision {
                            surface: c.surface.clone(),
                            key: spec.collision(),
                            value: key,
                            first: first.clone(),
                            second: name.to_owned(),
                        }),
                        None => {
                            owners.insert((c.surface.clone(), key), name.to_owned());
                        }
                    }
                }
                if spec.mounts_tools() {
                    for tool in c.tool_names() {
                        match tool_owners.get(&tool) {
                            Some((first, surface, contribution))
                                if !(surface == &c.surface && contribution == &c.name) =>
                            {
                                collisions.push(Collision {
                                    surface: "tool-name".to_owned(),
                                    key: CollisionKey::Name,
                                    value: tool,
                                    first: first.clone(),
                                    second: name.to_owned(),
                                });
                            }
                            Some(_) => {}
                            None => {
                                tool_owners.insert(
                                    tool,
                                    (name.to_owned(), c.surface.clone(), c.name.clone()),
                                );
                            }
                        }
                    }
                }
                by_surface
                    .entry(c.surface.clone())
                    .or_default()
                    .push(MergedEntry {
                        plugin: name.to_owned(),
                        contribution: c.clone(),
                    });
            }
        }
        if !collisions.is_empty() {
            return Err(MergeError { collisions });
        }
        for (surface, entries) in &mut by_surface {
            let ordering = self
                .registry
                .get(surface)
                .map_or(SurfaceOrder::Sorted, |s| s.ordering());
            match ordering {
                SurfaceOrder::Sorted => entries.sort_by(|a, b| {
                    (&a.plugin, &a.contribution.name).cmp(&(&b.plugin, &b.contribution.name))
                }),
                SurfaceOrder::Priority => entries.sort_by(|a, b| {
                    (a.contribution.priority(), &a.plugin, &a.contribution.name).cmp(&(
                        b.contribution.priority(),
                        &b.plugin,
                        &b.contribution.name,
                    ))
                }),
            }
        }
        let tool_surfaces = self
            .registry
            .specs()
            .filter(|s| s.mounts_tools())
            .map(|s| s.name().to_owned())
            .collect();
        Ok(Merged {
            by_surface,
            tool_surfaces,
        })
    }
}
