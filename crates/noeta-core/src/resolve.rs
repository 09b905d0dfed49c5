//! Resolution: the only place refs become values, each through the plugin that declares it, each at most once.
//!
//! `resolve_for` touches only the plugins an agent activates, plus the
//! process-wide surfaces (guards and observers: a check that cannot run must
//! not fail open) and the auto-consumed host surfaces (`skills`,
//! `mcp_server`). Other host-wired surfaces (`provider`, `sandbox_provider`,
//! host-registered ones) are never auto-resolved: the host picks one and calls
//! [`PluginSet::resolve_contribution`] itself.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, PoisonError};

use crate::loader::{PluginSet, ResolveRequest};
use crate::manifest::ManifestContribution;
use crate::merge::{Merged, MergedEntry};
use crate::panics::panic_message;
use crate::surface::ActivationScope;
use crate::surface::names;
use crate::value::Resolved;

/// Why a contribution could not be resolved. Every message names the plugin and the ref.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The plugin is not compiled in, so nothing can resolve its refs.
    #[error(
        "plugin `{plugin}` ({origin}): ref `{reference}` of {surface} `{name}` cannot be resolved — no compiled resolver knows it (the plugin is not linked into this host)"
    )]
    NoResolver {
        /// The plugin.
        plugin: String,
        /// Its origin.
        origin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
        /// The ref.
        reference: String,
    },
    /// The contribution has nothing to resolve.
    #[error(
        "plugin `{plugin}`: {surface} `{name}` has neither a ref, a path, nor a literal `text` to resolve"
    )]
    Nothing {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
    },
    /// The plugin's resolver refused the ref.
    #[error(
        "plugin `{plugin}`: ref `{reference}` of {surface} `{name}` failed to resolve: {reason}"
    )]
    Failed {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
        /// The ref.
        reference: String,
        /// The resolver's reason.
        reason: String,
    },
    /// The plugin's resolver panicked.
    #[error(
        "plugin `{plugin}`: resolving ref `{reference}` of {surface} `{name}` panicked: {message}"
    )]
    Panicked {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
        /// The ref.
        reference: String,
        /// The panic payload.
        message: String,
    },
    /// The value is not of the surface's kind.
    #[error(
        "plugin `{plugin}`: contribution `{name}` to surface `{surface}` failed validation: {reason}"
    )]
    Invalid {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
        /// The validator's reason.
        reason: String,
    },
    /// No such plugin is loaded.
    #[error("no loaded plugin named `{plugin}`")]
    UnknownPlugin {
        /// The name asked for.
        plugin: String,
    },
    /// The plugin declares no such contribution.
    #[error("plugin `{plugin}` declares no {surface} `{name}`")]
    UnknownContribution {
        /// The plugin.
        plugin: String,
        /// The surface.
        surface: String,
        /// The contribution.
        name: String,
    },
}

/// One memoised outcome; concurrent first requests for a key share it, so the resolver runs once.
type MemoSlot = Arc<OnceLock<Result<Resolved, ResolveError>>>;

/// Memoised resolutions, keyed by `(plugin, surface, name)`; failures are memoised too.
#[derive(Default)]
pub(crate) struct ResolveMemo {
    entries: BTreeMap<(String, String, String), MemoSlot>,
}

/// One resolved contribution, in merged order.
#[derive(Debug, Clone)]
pub struct ResolvedEntry {
    /// The contributing plugin.
    pub plugin: String,
    /// The contribution.
    pub contribution: ManifestContribution,
    /// Its value.
    pub value: Resolved,
}

/// Resolved contributions by surface, each surface in its merged order.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    by_surface: BTreeMap<String, Vec<ResolvedEntry>>,
}

impl Resolution {
    /// The resolved contributions to one surface, in order.
    pub fn for_surface(&self, surface: &str) -> &[ResolvedEntry] {
        self.by_surface.get(surface).map_or(&[], Vec::as_slice)
    }

    /// Surfaces with at least one resolved contribution.
    pub fn surfaces(&self) -> impl Iterator<Item = &str> {
        self.by_surface.keys().map(String::as_str)
    }
}

/// The resource-only surface whose value is its `path`.
const SKILLS: &str = names::SKILLS;

/// The host surfaces consumed as soon as their plugin is loaded.
pub(crate) const AUTO_CONSUMED: [&str; 2] = [SKILLS, names::MCP_SERVER];

impl PluginSet {
    /// Resolves one contribution (memoised) and validates it against its surface.
    pub fn resolve_contribution(
        &self,
        plugin: &str,
        surface: &str,
        name: &str,
    ) -> Result<Resolved, ResolveError> {
        let key = (plugin.to_owned(), surface.to_owned(), name.to_owned());
        let cell = Arc::clone(
            self.memo
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entries
                .entry(key)
                .or_default(),
        );
        cell.get_or_init(|| self.resolve_uncached(plugin, surface, name))
            .clone()
    }

    fn resolve_uncached(
        &self,
        plugin: &str,
        surface: &str,
        name: &str,
    ) -> Result<Resolved, ResolveError> {
        let loaded = self
            .plugins
            .get(plugin)
            .ok_or_else(|| ResolveError::UnknownPlugin {
                plugin: plugin.to_owned(),
            })?;
        let c = loaded
            .manifest
            .contributions
            .iter()
            .find(|c| c.surface == surface && c.name == name)
            .ok_or_else(|| ResolveError::UnknownContribution {
                plugin: plugin.to_owned(),
                surface: surface.to_owned(),
                name: name.to_owned(),
            })?;
        let value = match (&c.reference, &c.path, c.text()) {
            (_, Some(path), _) if surface == SKILLS => Resolved::SkillsPath(PathBuf::from(path)),
            (Some(reference), _, _) => {
                let Some(resolver) = &loaded.resolver else {
                    return Err(ResolveError::NoResolver {
                        plugin: plugin.to_owned(),
                        origin: loaded.origin.to_string(),
                        surface: surface.to_owned(),
                        name: name.to_owned(),
                        reference: reference.clone(),
                    });
                };
                let request = ResolveRequest {
                    plugin,
                    surface,
                    name,
                    reference,
                    params: &c.params,
                };
                let failed = |reason: String| ResolveError::Failed {
                    plugin: plugin.to_owned(),
                    surface: surface.to_owned(),
                    name: name.to_owned(),
                    reference: reference.clone(),
                    reason,
                };
                match catch_unwind(AssertUnwindSafe(|| resolver.resolve(&request))) {
                    Ok(Ok(value)) => value,
                    Ok(Err(reason)) => return Err(failed(reason)),
                    Err(payload) => {
                        return Err(ResolveError::Panicked {
                            plugin: plugin.to_owned(),
                            surface: surface.to_owned(),
                            name: name.to_owned(),
                            reference: reference.clone(),
                            message: panic_message(payload.as_ref()),
                        });
                    }
                }
            }
            (None, Some(path), _) => Resolved::SkillsPath(PathBuf::from(path)),
            (None, None, Some(text)) => Resolved::PromptFragment(text.to_owned()),
            (None, None, None) => {
                return Err(ResolveError::Nothing {
                    plugin: plugin.to_owned(),
                    surface: surface.to_owned(),
                    name: name.to_owned(),
                });
            }
        };
        let spec = self
            .registry
            .get(surface)
            .map_err(|err| ResolveError::Invalid {
                plugin: plugin.to_owned(),
                surface: surface.to_owned(),
                name: name.to_owned(),
                reason: err.to_string(),
            })?;
        // A validator is host code too: a panic in it is a failed validation, not a crash.
        let verdict =
            catch_unwind(AssertUnwindSafe(|| spec.validate(&value))).unwrap_or_else(|payload| {
                Err(format!(
                    "the surface validator panicked: {}",
                    panic_message(payload.as_ref())
                ))
            });
        verdict.map_err(|reason| ResolveError::Invalid {
            plugin: plugin.to_owned(),
            surface: surface.to_owned(),
            name: name.to_owned(),
            reason,
        })?;
        Ok(value)
    }

    /// Whether an agent activating `activated` takes this entry: per-agent surfaces from
    /// activated plugins, process-wide surfaces from every plugin, and the auto-consumed host surfaces.
    fn in_scope(&self, entry: &MergedEntry, activated: &BTreeSet<String>) -> bool {
        let Ok(spec) = self.registry.get(&entry.contribution.surface) else {
            return false;
        };
        match spec.scope() {
            ActivationScope::PerAgent => activated.contains(&entry.plugin),
            ActivationScope::Process => true,
            ActivationScope::HostWired => AUTO_CONSUMED.contains(&spec.name()),
        }
    }

    /// Resolves what an agent activating `activated` uses; every failure is reported.
    pub fn resolve_for(
        &self,
        merged: &Merged,
        activated: &BTreeSet<String>,
    ) -> Result<Resolution, Vec<ResolveError>> {
        let mut resolution = Resolution::default();
        let mut errors = Vec::new();
        for entry in merged.entries() {
            let c = &entry.contribution;
            // A declared tool is its pack's: the pack is resolved, the declaration is not.
            if !self.in_scope(entry, activated) || c.mounted_by().is_some() {
                continue;
            }
            match self.resolve_contribution(&entry.plugin, &c.surface, &c.name) {
                Ok(value) => resolution
                    .by_surface
                    .entry(c.surface.clone())
                    .or_default()
                    .push(ResolvedEntry {
                        plugin: entry.plugin.clone(),
                        contribution: c.clone(),
                        value,
                    }),
                Err(err) => errors.push(err),
            }
        }
        if errors.is_empty() {
            Ok(resolution)
        } else {
            Err(errors)
        }
    }

    /// Resolves every contribution of every loaded plugin (for `plugins check --resolve`).
    pub fn resolve_everything(&self, merged: &Merged) -> Vec<ResolveError> {
        merged
            .entries()
            .filter(|entry| entry.contribution.mounted_by().is_none())
            .filter_map(|entry| {
                let c = &entry.contribution;
                self.resolve_contribution(&entry.plugin, &c.surface, &c.name)
                    .err()
            })
            .collect()
    }
}
