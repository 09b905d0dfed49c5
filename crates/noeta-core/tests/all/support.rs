//! Shared fixtures: a manifest builder, plugin directories on disk, fixture values and counting/panicking resolvers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use noeta_core::{
    ActivationRules, AgentDefinition, AgentOptions, CompileError, CompiledAgent, ComponentRef,
    ContentKindSpec, ControlToolFactory, ControlToolMount, Guard, GuardInput, HostValue,
    LinkedPlugin, LoadOptions, MANIFEST_FILE, McpServerSpec, ObservedEvent, Observer,
    PackContribution, PluginSet, PluginSource, PolicyFactory, ProvidedReminder, ProviderInput,
    Reminder, ReminderInput, ReminderProvider, ResolveRequest, Resolved, Resolver,
    SessionBuildContext, SessionPackFactory, Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
    ToolResultTransform, TransformInput, Verdict, compile_agent, load_plugins, standard_registry,
};
use serde_json::{Value, json};

/// Asserts that `text` contains every needle, showing the whole text when one is missing.
#[track_caller]
pub(crate) fn assert_mentions(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            text.contains(needle),
            "expected the message to mention {needle:?}\n   message: {text}"
        );
    }
}

/// A TOML basic string holding `text`.
pub(crate) fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// Manifest text for tests: top-level keys, then `[[contributions]]` entries.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    name: String,
    top: Vec<String>,
    entries: Vec<String>,
}

impl Manifest {
    /// A manifest for plugin `name` with no contributions.
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            top: vec![format!("name = {}", quoted(name))],
            entries: Vec::new(),
        }
    }

    /// Adds a raw top-level line (`key = value`).
    pub(crate) fn top(mut self, line: &str) -> Self {
        self.top.push(line.to_owned());
        self
    }

    /// Declares `requires-noeta`.
    pub(crate) fn requires(self, range: &str) -> Self {
        let line = format!("requires-noeta = {}", quoted(range));
        self.top(&line)
    }

    /// Adds a contribution to `surface`; `body` holds further `key = value` lines.
    pub(crate) fn entry(mut self, surface: &str, body: &str) -> Self {
        self.entries.push(format!(
            "[[contributions]]\nsurface = {}\n{}\n",
            quoted(surface),
            body.trim()
        ));
        self
    }

    /// Adds a contribution to `surface` named `name` whose ref is `<plugin>::<name>`, plus `extra` lines.
    pub(crate) fn with(self, surface: &str, name: &str, extra: &str) -> Self {
        let body = format!(
            "name = {}\nref = {}\n{extra}",
            quoted(name),
            quoted(&format!("{}::{name}", self.name))
        );
        self.entry(surface, &body)
    }

    /// The TOML text.
    pub(crate) fn text(&self) -> String {
        let mut text = self.top.join("\n");
        text.push_str("\n\n");
        text.push_str(&self.entries.join("\n"));
        text
    }

    /// A linked third-party crate `crate_name` carrying this manifest.
    pub(crate) fn linked(
        &self,
        crate_name: &str,
        resolver: impl Resolver + 'static,
    ) -> LinkedPlugin {
        LinkedPlugin::new(leak(crate_name), leak(&self.text()), resolver)
    }

    /// Writes `<parent>/<plugin name>/noeta-plugin.toml` and returns the plugin directory.
    pub(crate) fn write_into(&self, parent: &Path) -> PathBuf {
        write_plugin(parent, &self.name, &self.text())
    }
}

/// Static text for [`LinkedPlugin::new`], which takes manifests embedded at compile time.
pub(crate) fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// Writes `<parent>/<dir_name>/noeta-plugin.toml` holding `text`; returns the plugin directory.
pub(crate) fn write_plugin(parent: &Path, dir_name: &str, text: &str) -> PathBuf {
    let dir = parent.join(dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(MANIFEST_FILE), text).unwrap();
    dir
}

/// A linked crate source for `manifest`, resolved by [`Fixtures`]; the crate is `<plugin>-crate`.
pub(crate) fn linked(manifest: &Manifest) -> PluginSource {
    let crate_name = format!("{}-crate", manifest.name);
    PluginSource::Linked(manifest.linked(&crate_name, Fixtures))
}

/// Load options over the standard registry, with an empty trust store and no gates.
pub(crate) fn options() -> LoadOptions {
    LoadOptions::new(standard_registry())
}

/// Loads `sources` with [`options`]; loading itself must succeed.
pub(crate) fn load(sources: &[PluginSource]) -> PluginSet {
    load_plugins(sources, &options()).unwrap()
}

/// Options for agent `name` activating `plugins`.
pub(crate) fn agent(name: &str, plugins: &[&str]) -> AgentOptions {
    let mut options = AgentOptions::named(name);
    options.plugins = plugins.iter().map(|p| (*p).to_owned()).collect();
    options
}

/// Merges `set` (which must not collide) and compiles `options` under default rules.
pub(crate) fn compile(
    set: &PluginSet,
    options: &AgentOptions,
) -> Result<CompiledAgent, CompileError> {
    compile_with(set, options, &ActivationRules::default())
}

/// Merges `set` (which must not collide) and compiles `options` under `rules`.
pub(crate) fn compile_with(
    set: &PluginSet,
    options: &AgentOptions,
    rules: &ActivationRules,
) -> Result<CompiledAgent, CompileError> {
    let merged = set.merged().unwrap();
    compile_agent(set, &merged, options, rules)
}

/// A set of plugin names.
pub(crate) fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

/// Every ordering of `items` (Heap's algorithm).
pub(crate) fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    fn heap<T: Clone>(k: usize, items: &mut Vec<T>, out: &mut Vec<Vec<T>>) {
        if k <= 1 {
            out.push(items.clone());
            return;
        }
        for i in 0..k {
            heap(k - 1, items, out);
            let j = if k.is_multiple_of(2) { i } else { 0 };
            items.swap(j, k - 1);
        }
    }
    let mut items = items.to_vec();
    let mut out = Vec::new();
    heap(items.len(), &mut items, &mut out);
    out
}

// ---------------------------------------------------------------------------
// Resolvers
// ---------------------------------------------------------------------------

/// Resolves a contribution on any standard surface to a fixture value built from its name and params.
///
/// Params read: `tools` (tool and control-tool names), `body` (prompt text), `band`,
/// `agent_plugins` / `agent_agents` (a child agent's lists), `policy_version`,
/// `skip_agents` (agents a control tool declines), `mcp_tool` (the one tool an MCP server serves).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fixtures;

impl Resolver for Fixtures {
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        fixture_value(request)
    }
}

fn strings(params: &BTreeMap<String, Value>, key: &str) -> Vec<String> {
    match params.get(key) {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The fixture value for one request (see [`Fixtures`]).
pub(crate) fn fixture_value(request: &ResolveRequest<'_>) -> Result<Resolved, String> {
    let params = request.params;
    let text = |key: &str| params.get(key).and_then(Value::as_str).map(str::to_owned);
    let first_tool = || {
        strings(params, "tools")
            .into_iter()
            .next()
            .unwrap_or_else(|| request.name.to_owned())
    };
    let value = match request.surface {
        "tool" => Resolved::Tool(Arc::new(EchoTool::new(&first_tool()))),
        "agent" => Resolved::Agent(Arc::new(AgentDefinition {
            name: text("value_name").unwrap_or_else(|| request.name.to_owned()),
            description: format!("the {} agent", request.name),
            instructions: format!("You are {}.", request.name),
            tools: None,
            plugins: strings(params, "agent_plugins"),
            agents: strings(params, "agent_agents"),
            model: None,
        })),
        "content_kind" => Resolved::ContentKind(Arc::new(ContentKindSpec {
            kind: text("value_name").unwrap_or_else(|| request.name.to_owned()),
            band: params.get("band").and_then(Value::as_i64).unwrap_or(0),
            title: request.name.to_uppercase(),
        })),
        "prompt_fragment" => Resolved::PromptFragment(text("body").unwrap_or_default()),
        "policy" => Resolved::Policy(Arc::new(FixedPolicy(ComponentRef::new(
            request.name,
            text("policy_version").unwrap_or_else(|| "1".to_owned()),
        )))),
        "guard" => Resolved::Guard(Arc::new(NoOpinion)),
        "observer" => Resolved::Observer(Arc::new(Silent)),
        "provider" => Resolved::Provider(HostValue::new(request.name.to_owned())),
        "sandbox_provider" => Resolved::SandboxProvider(HostValue::new(request.name.to_owned())),
        "reminder_provider" => Resolved::ReminderProvider(Arc::new(NoReminders)),
        "reminder" => Resolved::Reminder(Arc::new(Quiet)),
        "tool_result_transform" => Resolved::ToolResultTransform(Arc::new(Unchanged)),
        "mcp_server" => Resolved::McpServer(Arc::new(McpServerSpec {
            name: request.name.to_owned(),
            version: "1.0.0".to_owned(),
            tools: text("mcp_tool")
                .map(|name| Arc::new(EchoTool::new(&name)) as Arc<dyn Tool>)
                .into_iter()
                .collect(),
        })),
        "skills" => Resolved::SkillsPath(PathBuf::from(format!("/srv/skills/{}", request.name))),
        "session_pack" => Resolved::SessionPack(Arc::new(EmptyPack)),
        "control_tool" => Resolved::ControlTool(Arc::new(GatedControl {
            name: first_tool(),
            skip: strings(params, "skip_agents"),
        })),
        other => return Err(format!("no fixture for surface `{other}`")),
    };
    Ok(value)
}

/// Counts the calls per ref of the resolver it wraps; clones share the resolver and the counts.
pub(crate) struct Counting<R> {
    inner: Arc<R>,
    total: Arc<AtomicUsize>,
    per_ref: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl<R> Clone for Counting<R> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            total: Arc::clone(&self.total),
            per_ref: Arc::clone(&self.per_ref),
        }
    }
}

impl<R: Resolver> Counting<R> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner: Arc::new(inner),
            total: Arc::new(AtomicUsize::new(0)),
            per_ref: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// How often `reference` was resolved.
    pub(crate) fn calls(&self, reference: &str) -> usize {
        self.per_ref
            .lock()
            .unwrap()
            .get(reference)
            .copied()
            .unwrap_or(0)
    }

    /// How often anything was resolved.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

impl<R: Resolver> Resolver for Counting<R> {
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        self.total.fetch_add(1, Ordering::SeqCst);
        *self
            .per_ref
            .lock()
            .unwrap()
            .entry(request.reference.to_owned())
            .or_default() += 1;
        self.inner.resolve(request)
    }
}

/// A resolver that panics with its message on every call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Panicking(pub(crate) &'static str);

impl Resolver for Panicking {
    fn resolve(&self, _request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        panic!("{}", self.0)
    }
}

/// A resolver built from a closure.
pub(crate) struct ResolveWith<F>(pub(crate) F);

impl<F> Resolver for ResolveWith<F>
where
    F: Fn(&ResolveRequest<'_>) -> Result<Resolved, String> + Send + Sync,
{
    fn resolve(&self, request: &ResolveRequest<'_>) -> Result<Resolved, String> {
        (self.0)(request)
    }
}

// ---------------------------------------------------------------------------
// Fixture values
// ---------------------------------------------------------------------------

/// A read-only tool that echoes its `text` input along with the call's idempotency key.
#[derive(Debug, Clone)]
pub(crate) struct EchoTool {
    name: String,
    description: String,
}

impl EchoTool {
    /// An echo tool called `name`.
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            description: format!("Echoes its input ({name})."),
        }
    }

    /// The same tool with another description.
    pub(crate) fn described(mut self, description: &str) -> Self {
        description.clone_into(&mut self.description);
        self
    }
}

#[async_trait]
impl Tool for EchoTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = input.get("text").and_then(Value::as_str).ok_or_else(|| {
            ToolError::RespondToModel(format!("{}: `text` is required", self.name))
        })?;
        Ok(ToolOutput::text(format!(
            "{text} (key {})",
            ctx.idempotency_key()
        )))
    }
}

/// A policy factory pinning a fixed ref.
pub(crate) struct FixedPolicy(pub(crate) ComponentRef);

impl PolicyFactory for FixedPolicy {
    fn policy_ref(&self) -> ComponentRef {
        self.0.clone()
    }

    fn build(&self) -> Arc<dyn noeta_core::policy::Policy> {
        noeta_core::policy::minimal_policy()
    }
}

/// A control tool that mounts under `name` for every agent except those in `skip`.
pub(crate) struct GatedControl {
    name: String,
    skip: Vec<String>,
}

impl ControlToolFactory for GatedControl {
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        if self.skip.contains(&ctx.agent) {
            return Ok(None);
        }
        Ok(Some(ControlToolMount::new(Arc::new(EchoTool::new(
            &self.name,
        )))))
    }
}

struct NoOpinion;

impl Guard for NoOpinion {
    fn check(&self, _input: &GuardInput) -> Option<Verdict> {
        None
    }
}

struct Silent;

impl Observer for Silent {
    fn observe(&self, _event: &ObservedEvent) -> Result<(), String> {
        Ok(())
    }
}

struct NoReminders;

#[async_trait]
impl ReminderProvider for NoReminders {
    async fn provide(&self, _input: ProviderInput<'_>) -> Result<Vec<ProvidedReminder>, String> {
        Ok(Vec::new())
    }
}

struct Quiet;

impl Reminder for Quiet {
    fn render(&self, _input: &ReminderInput<'_>) -> Option<String> {
        None
    }
}

struct Unchanged;

impl ToolResultTransform for Unchanged {
    fn transform(&self, input: TransformInput) -> Result<ToolOutput, String> {
        Ok(input.output)
    }
}

struct EmptyPack;

impl SessionPackFactory for EmptyPack {
    fn build(&self, _ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        Ok(PackContribution::empty())
    }
}
