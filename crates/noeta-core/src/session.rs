//! The session build: one compiled agent's resolved contributions joined into one ordered extension list.
//!
//! This is where the surfaces a plugin declares meet the hooks the runner
//! calls. The order decides "first offer wins", "first rewrite wins" and the
//! byte order of context and reminders: the kernel's own entry; session packs
//! by `(priority, plugin, name)`; the other per-agent contributions surface by
//! surface, each in its surface's order; process-wide guards and observers by
//! `(plugin, name)`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::canonical;
use crate::contrib::{
    Checkpoint, ControlToolMount, Guard, GuardInput, ObservedEvent, Observer, ProviderInput,
    Reminder, ReminderInput, ReminderProvider, Seam, SessionBuildContext, StateView,
    ToolResultTransform, TransformInput, Verdict,
};
use crate::extension::{ContextPart, Extension, HookError, HookResult, SpawnRequest, View};
use crate::fold::{Folder, TaskState};
use crate::hooks::guarded;
use crate::identity::{AgentSpec, CompiledAgent};
use crate::loader::{PluginSet, SourceKind};
use crate::model::ToolCall;
use crate::policy::{Policy, minimal_policy};
use crate::records::PluginPin;
use crate::store::Event;
use crate::surface::names;
use crate::tool::{Tool, ToolOutput};
use crate::value::Resolved;

/// Everything the runner needs to run one agent.
#[derive(Clone)]
pub struct Session {
    /// The compiled identity.
    pub spec: AgentSpec,
    /// The agent's extension list, in call order.
    pub extensions: Vec<Arc<dyn Extension>>,
    /// The decision loop.
    pub policy: Arc<dyn Policy>,
    /// The plugins the agent runs with, sorted by name.
    pub pins: Vec<PluginPin>,
    /// The folder for this extension list (its plugin-set hash tags snapshots).
    pub folder: Folder,
    /// The resident content kinds in layout order: the session packs' kinds by band (ties in
    /// pack order), then the agent's `content_kind` contributions.
    pub kinds: Vec<crate::contrib::ContentKindSpec>,
}

impl Session {
    /// Adds a content kind after the session's own (a host's or a test's residents).
    pub fn with_content_kind(mut self, kind: crate::contrib::ContentKindSpec) -> Self {
        self.kinds.push(kind);
        self
    }

    /// Appends a host's own extension (a terminal approver, an event printer) to the list and
    /// rebuilds the folder over it; the plugin-set tag of snapshots is unchanged, since a host
    /// extension keeps no records of its own.
    pub fn with_host_extension(mut self, extension: Arc<dyn Extension>) -> Self {
        self.extensions.push(extension);
        self.folder = self.folder.rebuilt(&self.extensions);
        self
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.extensions.iter().map(|e| e.name()).collect();
        f.debug_struct("Session")
            .field("agent", &self.spec.name)
            .field("extensions", &names)
            .finish_non_exhaustive()
    }
}

/// A session that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The policy that would run is not the one the agent's identity pins.
    #[error(
        "agent `{agent}` pins policy {pinned}, but the policy available to run it is {running}"
    )]
    PolicyMismatch {
        /// The agent.
        agent: String,
        /// The pinned policy.
        pinned: String,
        /// The policy that would run.
        running: String,
    },
    /// Two extensions in one agent's list share a name (they would share records and state).
    #[error(
        "agent `{agent}` has two extensions named `{name}` — names must be unique, since records and state live under them"
    )]
    DuplicateExtension {
        /// The agent.
        agent: String,
        /// The shared name.
        name: String,
    },
    /// Two session packs (or a pack and a `content_kind` contribution) declare one content kind.
    #[error(
        "agent `{agent}`: content kind `{kind}` is declared by both {first} and {second} — a kind has one owner"
    )]
    DuplicateContentKind {
        /// The agent.
        agent: String,
        /// The kind.
        kind: String,
        /// The first declaration (`plugin/pack`).
        first: String,
        /// The second.
        second: String,
    },
    /// A session pack's factory failed or panicked.
    #[error("plugin `{plugin}`: session pack `{pack}` failed for agent `{agent}`: {reason}")]
    Pack {
        /// The plugin.
        plugin: String,
        /// The pack.
        pack: String,
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
}

impl StateView for TaskState {
    fn ext_state(&self, name: &str) -> Option<&Value> {
        self.ext.get(name)
    }
}

/// The kernel's own entry: the agent's instructions as the stable system text.
struct CoreEntry {
    instructions: String,
}

#[async_trait]
impl Extension for CoreEntry {
    fn name(&self) -> &str {
        "core"
    }

    fn context(&self, _view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        if self.instructions.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![ContextPart::stable(self.instructions.clone())])
    }
}

/// Tools offered by one source (a pack, or the agent's tool contributions).
struct OfferTools {
    name: String,
    tools: Vec<Arc<dyn Tool>>,
}

#[async_trait]
impl Extension for OfferTools {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(self.tools.clone())
    }
}

/// A `reminder` contribution: a pure tail render.
struct TailReminder {
    name: String,
    reminder: Arc<dyn Reminder>,
}

#[async_trait]
impl Extension for TailReminder {
    fn name(&self) -> &str {
        &self.name
    }

    fn tail(&self, view: &View<'_>) -> Option<String> {
        let input = ReminderInput::new(view.agent(), view, view.core()).with_roster(view.agents());
        match guarded(|| self.reminder.render(&input)) {
            Ok(text) => text,
            Err(panic) => {
                tracing::warn!(reminder = %self.name, "render {panic}; it renders nothing");
                None
            }
        }
    }
}

/// A `reminder_provider` contribution: runs only at its seams, and its output is recorded.
struct SeamProvider {
    name: String,
    seams: Vec<Seam>,
    provider: Arc<dyn ReminderProvider>,
}

impl SeamProvider {
    async fn provide(&self, view: &View<'_>, seam: Seam, message: Option<&str>) -> HookResult<()> {
        let reminders = self
            .provider
            .provide(ProviderInput::new(seam, message, view))
            .await
            .map_err(HookError::new)?;
        let seam_name = match seam {
            Seam::TurnIntake => "turn_intake",
            Seam::TaskSeed => "task_seed",
        };
        for reminder in reminders {
            view.record_with_message(
                &self.name,
                "reminder",
                json!({ "seam": seam_name }),
                &reminder.text,
            );
        }
        // Marks the seam done even when nothing was provided, so a resume never asks again.
        view.record(&self.name, "provided", json!({ "seam": seam_name }));
        Ok(())
    }
}

#[async_trait]
impl Extension for SeamProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        let seeded = view
            .ext_state(&self.name)
            .and_then(|s| s.get("task_seed"))
            .is_some();
        if self.seams.contains(&Seam::TaskSeed) && !seeded {
            self.provide(view, Seam::TaskSeed, None).await?;
        }
        Ok(())
    }

    async fn turn_intake(&self, view: &View<'_>, message: &str) -> HookResult<()> {
        if self.seams.contains(&Seam::TurnIntake) {
            self.provide(view, Seam::TurnIntake, Some(message)).await?;
        }
        Ok(())
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if kind == "provided"
            && let Some(seam) = data.get("seam").and_then(Value::as_str)
        {
            if !state.is_object() {
                *state = json!({});
            }
            if let Some(map) = state.as_object_mut() {
                map.insert(seam.to_owned(), Value::Bool(true));
            }
        }
        Ok(())
    }
}

/// A `tool_result_transform` contribution: a failure fails the call closed.
struct Transform {
    name: String,
    transform: Arc<dyn ToolResultTransform>,
}

#[async_trait]
impl Extension for Transform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn after_tool(
        &self,
        _view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        let input = TransformInput::new(call.name.clone(), call.input.clone(), output);
        let outcome = guarded(|| self.transform.transform(input)).and_then(|outcome| outcome);
        Ok(outcome.unwrap_or_else(|reason| {
            ToolOutput::error(format!(
                "{}: the result was withheld because transform `{}` failed: {reason}",
                call.name, self.name
            ))
        }))
    }
}

/// A process-wide `guard`: asked before tools, at the spawn checkpoint, and before finishing.
struct GuardEntry {
    name: String,
    guard: Arc<dyn Guard>,
}

impl GuardEntry {
    fn check(&self, view: &View<'_>, checkpoint: Checkpoint) -> HookResult<Option<Verdict>> {
        let input = GuardInput::new(view.task_id().as_str(), view.agent(), checkpoint);
        guarded(|| self.guard.check(&input)).map_err(HookError::new)
    }
}

#[async_trait]
impl Extension for GuardEntry {
    fn name(&self) -> &str {
        &self.name
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        self.check(
            view,
            Checkpoint::ToolCall {
                tool: call.name.clone(),
                input: call.input.clone(),
            },
        )
    }

    fn before_spawn(&self, view: &View<'_>, spawn: &SpawnRequest) -> HookResult<Option<Verdict>> {
        self.check(
            view,
            Checkpoint::Spawn {
                agent: spawn.agent.clone(),
                depth: spawn.depth,
            },
        )
    }

    async fn before_finish(&self, view: &View<'_>) -> HookResult<Option<String>> {
        Ok(match self.check(view, Checkpoint::Finish)? {
            Some(Verdict::Deny { reason }) => Some(reason),
            _ => None,
        })
    }
}

/// A process-wide `observer`: sees every appended event; a failure is skipped.
struct ObserverEntry {
    name: String,
    observer: Arc<dyn Observer>,
}

#[async_trait]
impl Extension for ObserverEntry {
    fn name(&self) -> &str {
        &self.name
    }

    fn on_event(&self, view: &View<'_>, event: &Event) -> HookResult<()> {
        let observed = ObservedEvent::new(
            view.task_id().as_str(),
            event.seq,
            event.record.extension.clone(),
            event.record.kind.clone(),
            event.record.data.clone(),
        );
        guarded(|| self.observer.observe(&observed))
            .and_then(|outcome| outcome)
            .map_err(HookError::new)
    }
}

fn pin_for(set: &PluginSet, name: &str, config: &BTreeMap<String, Value>) -> Option<PluginPin> {
    let plugin = set.get(name)?;
    let source = match plugin.source {
        SourceKind::Builtin => "builtin",
        SourceKind::Crate => "crate",
        SourceKind::Path | SourceKind::User | SourceKind::Workspace => "file",
    };
    let version = match (&plugin.manifest.version, plugin.source.is_linked()) {
        (Some(v), true) => v.clone(),
        // An on-disk plugin is pinned by the content of every file in its directory (its
        // manifest's alone for a manifest given by itself), so any edit is noticed.
        _ => {
            let tree = match &plugin.origin {
                crate::manifest::Origin::File(path)
                    if path
                        .file_name()
                        .is_some_and(|n| n == crate::manifest::MANIFEST_FILE) =>
                {
                    path.parent()
                        .and_then(|dir| canonical::tree_sha256(dir).ok())
                }
                _ => None,
            };
            let hash = tree.unwrap_or_else(|| {
                let manifest = serde_json::to_value(&plugin.manifest).unwrap_or(Value::Null);
                canonical::sha256_hex(&canonical::to_bytes(&manifest))
            });
            format!("sha256:{hash}")
        }
    };
    // Params are hashed as written: a secret reference such as `{env:NAME}` is never resolved here.
    let params = config.get(name).cloned().unwrap_or(Value::Null);
    Some(PluginPin {
        name: name.to_owned(),
        source: source.to_owned(),
        version,
        params: canonical::sha256_hex(&canonical::to_bytes(&params)),
    })
}

/// The plugin instances (built session packs) shared by the sessions built over them: one per
/// plugin, pack and parameters (resolved, secrets included, so a rotated secret builds a new
/// instance). A host keeps one for as long as its plugin code and settings stand, and starts
/// a new one when it reloads them. Cloning shares the instances.
#[derive(Clone, Default)]
pub struct Instances {
    built: Arc<std::sync::Mutex<BTreeMap<InstanceKey, Arc<BuiltPack>>>>,
    host_values: crate::contrib::HostValues,
}

impl Instances {
    /// An empty set: the first session built over it builds every pack.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same set, handing `value` to every session pack built over it as `name`
    /// ([`SessionBuildContext::host_values`]). Set them before the first session is built.
    #[must_use]
    pub fn with_host_value(mut self, name: impl Into<String>, value: crate::HostValue) -> Self {
        self.host_values.insert(name.into(), value);
        self
    }

    /// How many pack instances have been built.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none has been built yet.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<InstanceKey, Arc<BuiltPack>>> {
        // A panic while the map is held cannot leave it half-changed (inserts are single).
        self.built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, key: &InstanceKey) -> Option<Arc<BuiltPack>> {
        self.lock().get(key).cloned()
    }

    /// Keeps `built` unless another build got there first; returns the one kept.
    fn keep(&self, key: InstanceKey, built: Arc<BuiltPack>) -> Arc<BuiltPack> {
        Arc::clone(self.lock().entry(key).or_insert(built))
    }
}

impl std::fmt::Debug for Instances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let built = self.lock();
        f.debug_list()
            .entries(built.keys().map(|k| format!("{}/{}", k.plugin, k.pack)))
            .finish()
    }
}

/// What one pack instance is built from.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InstanceKey {
    plugin: String,
    pack: String,
    /// The canonical bytes of the plugin's resolved parameters.
    params: Vec<u8>,
    /// The agent's facts, for a pack that reads them.
    agent: Option<String>,
}

/// One built pack and the control tools it mounted.
struct BuiltPack {
    pack: crate::contrib::PackContribution,
    controls: Vec<(i64, ControlToolMount)>,
}

/// Everything of the build context a pack that reads the agent may depend on.
fn agent_facts(ctx: &SessionBuildContext) -> String {
    let facts = json!({
        "agent": ctx.agent,
        "plugins": ctx.plugins,
        "roster": ctx.roster,
        "policy": ctx.policy.to_string(),
        "tools": ctx.tools,
        "config": ctx.config,
    });
    String::from_utf8_lossy(&canonical::to_bytes(&facts)).into_owned()
}

/// Builds a pack and the control tools it mounts; a panic is an error like any other.
fn build_pack(
    factory: &dyn crate::contrib::SessionPackFactory,
    ctx: &SessionBuildContext,
) -> Result<BuiltPack, String> {
    let pack = guarded(|| factory.build(ctx))??;
    let mut controls = Vec::new();
    for (priority, control) in &pack.control_tools {
        let mount = guarded(|| control.build(ctx))
            .map_err(|panic| format!("a control tool factory {panic}"))??;
        if let Some(mount) = mount {
            controls.push((*priority, mount));
        }
    }
    Ok(BuiltPack { pack, controls })
}

/// Builds the session for a compiled agent. `default_policy` runs the agent when no policy
/// plugin is active (the host's default loop); without one the kernel's minimal policy runs.
/// Either way it must be the policy the agent's identity pins.
pub fn build_session(
    set: &PluginSet,
    compiled: &CompiledAgent,
    config: &BTreeMap<String, Value>,
    default_policy: Option<Arc<dyn Policy>>,
) -> Result<Session, SessionError> {
    build_session_resolved(set, compiled, config, config, default_policy)
}

/// [`build_session`] for settings holding secret references: the plugin pins hash `config` as
/// written (so a pin never depends on a secret), while the packs get `resolved`, the same
/// settings with each reference replaced by its secret.
pub fn build_session_resolved(
    set: &PluginSet,
    compiled: &CompiledAgent,
    config: &BTreeMap<String, Value>,
    resolved: &BTreeMap<String, Value>,
    default_policy: Option<Arc<dyn Policy>>,
) -> Result<Session, SessionError> {
    build_session_shared(
        set,
        compiled,
        config,
        resolved,
        default_policy,
        &Instances::default(),
    )
}

/// The controls and content kinds the session packs bring, each kind with its owner; their
/// tools (within the agent's allow-list) and extensions joined to `extensions`. A pack is
/// built once per plugin, pack, parameters (and agent, for a pack that reads it) in
/// `instances`.
#[expect(
    clippy::type_complexity,
    reason = "the two lists build_session_shared orders next"
)]
fn add_packs(
    spec: &AgentSpec,
    resolution: &crate::resolve::Resolution,
    ctx: &SessionBuildContext,
    instances: &Instances,
    extensions: &mut Vec<Arc<dyn Extension>>,
) -> Result<
    (
        Vec<(i64, ControlToolMount)>,
        Vec<(crate::contrib::ContentKindSpec, String)>,
    ),
    SessionError,
> {
    let mut pack_controls: Vec<(i64, ControlToolMount)> = Vec::new();
    let mut pack_kinds: Vec<(crate::contrib::ContentKindSpec, String)> = Vec::new();
    for entry in resolution.for_surface(names::SESSION_PACK) {
        let Resolved::SessionPack(factory) = &entry.value else {
            continue;
        };
        let fail = |reason: String| SessionError::Pack {
            plugin: entry.plugin.clone(),
            pack: entry.contribution.name.clone(),
            agent: spec.name.clone(),
            reason,
        };
        let key = InstanceKey {
            plugin: entry.plugin.clone(),
            pack: entry.contribution.name.clone(),
            params: canonical::to_bytes(ctx.config(&entry.plugin)),
            agent: factory.reads_agent().then(|| agent_facts(ctx)),
        };
        let built = match instances.get(&key) {
            Some(built) => built,
            None => {
                let built = Arc::new(build_pack(factory.as_ref(), ctx).map_err(fail)?);
                instances.keep(key, built)
            }
        };
        let BuiltPack { pack, controls } = built.as_ref();
        // The agent's tool allow-list holds for pack tools too (a tool flagged
        // `past_agent_lists` passes it).
        let tools: Vec<Arc<dyn Tool>> = pack
            .tools
            .iter()
            .filter(|tool| spec.allows(tool.name(), &tool.flags()))
            .cloned()
            .collect();
        if !tools.is_empty() {
            extensions.push(Arc::new(OfferTools {
                name: format!("{}/{}", entry.plugin, entry.contribution.name),
                tools,
            }));
        }
        extensions.extend(pack.extensions.iter().cloned());
        pack_controls.extend(controls.iter().cloned());
        let owner = format!("{}/{}", entry.plugin, entry.contribution.name);
        pack_kinds.extend(
            pack.content_kinds
                .iter()
                .map(|k| (k.clone(), owner.clone())),
        );
    }
    Ok((pack_controls, pack_kinds))
}

/// The resident content kinds of a session in layout order: the packs' kinds by band (ties in
/// pack order), then the agent's own `content_kind` contributions; a kind has one owner.
fn layout_kinds(
    spec: &AgentSpec,
    resolution: &crate::resolve::Resolution,
    mut pack_kinds: Vec<(crate::contrib::ContentKindSpec, String)>,
) -> Result<Vec<crate::contrib::ContentKindSpec>, SessionError> {
    let mut own_kinds = Vec::new();
    for entry in resolution.for_surface(names::CONTENT_KIND) {
        if let Resolved::ContentKind(kind) = &entry.value
            && spec.plugins.contains(&entry.plugin)
        {
            let owner = format!("{}/{}", entry.plugin, entry.contribution.name);
            own_kinds.push((kind.as_ref().clone(), owner));
        }
    }
    let declared: Vec<&(crate::contrib::ContentKindSpec, String)> =
        pack_kinds.iter().chain(&own_kinds).collect();
    for (i, (kind, owner)) in declared.iter().enumerate() {
        if let Some((_, first)) = declared[..i].iter().find(|(k, _)| k.kind == kind.kind) {
            return Err(SessionError::DuplicateContentKind {
                agent: spec.name.clone(),
                kind: kind.kind.clone(),
                first: first.clone(),
                second: owner.clone(),
            });
        }
    }
    // Pack kinds by band, ties in pack order (the sort is stable).
    pack_kinds.sort_by_key(|(kind, _)| kind.band);
    Ok(pack_kinds
        .into_iter()
        .chain(own_kinds)
        .map(|(kind, _)| kind)
        .collect())
}

/// The pins of a session: the agent's plugins, and those whose contributions reach it without
/// activation (the process-wide surfaces' and the auto-consumed host surfaces'), by name.
fn pins_of(
    set: &PluginSet,
    spec: &AgentSpec,
    resolution: &crate::resolve::Resolution,
    config: &BTreeMap<String, Value>,
) -> Vec<PluginPin> {
    let mut pinned: Vec<String> = spec.plugins.clone();
    for surface in resolution.surfaces() {
        let reaches_every_agent = set.registry().get(surface).is_ok_and(|s| {
            s.scope() == crate::surface::ActivationScope::Process
                || crate::resolve::AUTO_CONSUMED.contains(&surface)
        });
        if reaches_every_agent {
            pinned.extend(
                resolution
                    .for_surface(surface)
                    .iter()
                    .map(|e| e.plugin.clone()),
            );
        }
    }
    pinned.sort();
    pinned.dedup();
    pinned
        .iter()
        .filter_map(|name| pin_for(set, name, config))
        .collect()
}

/// The surfaces whose contributions join a session as extensions of their own, through
/// [`adapter`], in the order they join (after the packs and the offered tools).
const ADAPTED_SURFACES: [&str; 5] = [
    names::REMINDER_PROVIDER,
    names::REMINDER,
    names::TOOL_RESULT_TRANSFORM,
    names::GUARD,
    names::OBSERVER,
];

/// The extension a contribution of an [adapted surface](ADAPTED_SURFACES) joins the session
/// as, named `<plugin>/<contribution>`; `None` for a value of another surface.
fn adapter(entry: &crate::resolve::ResolvedEntry) -> Option<Arc<dyn Extension>> {
    let name = format!("{}/{}", entry.plugin, entry.contribution.name);
    Some(match &entry.value {
        Resolved::ReminderProvider(provider) => Arc::new(SeamProvider {
            name,
            seams: entry.contribution.seams(),
            provider: Arc::clone(provider),
        }),
        Resolved::Reminder(reminder) => Arc::new(TailReminder {
            name,
            reminder: Arc::clone(reminder),
        }),
        Resolved::ToolResultTransform(transform) => Arc::new(Transform {
            name,
            transform: Arc::clone(transform),
        }),
        Resolved::Guard(guard) => Arc::new(GuardEntry {
            name,
            guard: Arc::clone(guard),
        }),
        Resolved::Observer(observer) => Arc::new(ObserverEntry {
            name,
            observer: Arc::clone(observer),
        }),
        _ => return None,
    })
}

/// [`build_session_resolved`] over `instances`: a session pack already built there for the
/// same plugin and parameters (and, for a pack that [reads the
/// agent](crate::contrib::SessionPackFactory::reads_agent), the same agent) is reused, not
/// built again, so every agent of a host that uses a plugin with the same parameters shares
/// one instance of it. A pack that fails to build is not kept: the next build tries again.
pub fn build_session_shared(
    set: &PluginSet,
    compiled: &CompiledAgent,
    config: &BTreeMap<String, Value>,
    resolved: &BTreeMap<String, Value>,
    default_policy: Option<Arc<dyn Policy>>,
    instances: &Instances,
) -> Result<Session, SessionError> {
    let spec = compiled.spec.clone();
    let resolution = &compiled.resolution;
    let mut extensions: Vec<Arc<dyn Extension>> = vec![Arc::new(CoreEntry {
        instructions: spec.instructions.clone(),
    })];

    let mut ctx = SessionBuildContext::new(spec.name.clone());
    ctx.plugins = spec.plugins.clone();
    ctx.roster = spec.spawnable.clone();
    ctx.config = resolved.clone();
    ctx.policy = spec.policy.clone();
    ctx.tools = spec.allowed_tools.clone();
    ctx.skills_dirs = resolution
        .for_surface(names::SKILLS)
        .iter()
        .filter_map(|entry| match &entry.value {
            Resolved::SkillsPath(path) => Some((entry.plugin.clone(), path.clone())),
            _ => None,
        })
        .collect();
    ctx.host_values = instances.host_values.clone();
    ctx.mcp_servers = resolution
        .for_surface(names::MCP_SERVER)
        .iter()
        .map(|entry| (entry.contribution.name.clone(), entry.plugin.clone()))
        .collect();
    let (pack_controls, pack_kinds) =
        add_packs(&spec, resolution, &ctx, instances, &mut extensions)?;
    let kinds = layout_kinds(&spec, resolution, pack_kinds)?;

    // The agent's own tools (tool contributions and in-process MCP servers), in name order,
    // then its control tools in schema render order.
    if !compiled.tools.is_empty() {
        extensions.push(Arc::new(OfferTools {
            name: "core/tools".to_owned(),
            tools: compiled.tools.values().cloned().collect(),
        }));
    }
    // Control tools from contributions and from packs, in schema render order (priority, name).
    let mut controls: Vec<(i64, ControlToolMount)> = compiled
        .spec
        .control_tools
        .iter()
        .map(|c| c.priority)
        .zip(compiled.control_tools.iter().cloned())
        .collect();
    controls.extend(pack_controls);
    controls.sort_by(|(pa, a), (pb, b)| (pa, a.name()).cmp(&(pb, b.name())));
    if !controls.is_empty() {
        extensions.push(Arc::new(OfferTools {
            name: "core/control".to_owned(),
            tools: controls.iter().map(|(_, m)| Arc::clone(&m.tool)).collect(),
        }));
        // The extensions that fold control tools' records, in the same order.
        extensions.extend(controls.iter().filter_map(|(_, m)| m.extension.clone()));
    }
    // Each contribution of the adapted surfaces joins as an extension of its own, surface by
    // surface in this order, each surface's in resolution order.
    for surface in ADAPTED_SURFACES {
        extensions.extend(resolution.for_surface(surface).iter().filter_map(adapter));
    }

    let policy = resolution
        .for_surface(names::POLICY)
        .iter()
        .find_map(|entry| match &entry.value {
            Resolved::Policy(factory) if spec.plugins.contains(&entry.plugin) => {
                Some(factory.build())
            }
            _ => None,
        })
        .or(default_policy)
        .unwrap_or_else(minimal_policy);
    if policy.policy_ref() != spec.policy {
        return Err(SessionError::PolicyMismatch {
            agent: spec.name.clone(),
            pinned: spec.policy.to_string(),
            running: policy.policy_ref().to_string(),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for ext in &extensions {
        if !seen.insert(ext.name()) {
            return Err(SessionError::DuplicateExtension {
                agent: spec.name.clone(),
                name: ext.name().to_owned(),
            });
        }
    }

    let pins = pins_of(set, &spec, resolution, config);
    let plugin_set = canonical::sha256_hex(&canonical::to_bytes(
        &serde_json::to_value(&pins).unwrap_or(Value::Null),
    ));
    let folder = Folder::new(&extensions, plugin_set);
    Ok(Session {
        spec,
        extensions,
        policy,
        pins,
        folder,
        kinds,
    })
}

/// A session with no plugins at all: the kernel's own entry and minimal policy.
pub fn bare_session(name: &str, instructions: &str) -> Session {
    let extensions: Vec<Arc<dyn Extension>> = vec![Arc::new(CoreEntry {
        instructions: instructions.to_owned(),
    })];
    let folder = Folder::new(&extensions, canonical::sha256_hex(b"[]"));
    Session {
        spec: AgentSpec {
            name: name.to_owned(),
            instructions: instructions.to_owned(),
            policy: crate::policy::minimal_policy_ref(),
            tools: Vec::new(),
            plugins: Vec::new(),
            spawnable: Vec::new(),
            prompt_fragments: Vec::new(),
            content_kinds: Vec::new(),
            control_tools: Vec::new(),
            allowed_tools: None,
        },
        extensions,
        policy: minimal_policy(),
        pins: Vec::new(),
        folder,
        kinds: Vec::new(),
    }
}
