//! Composing a model request: the stable prefix (system text and tool schemas), residents in
//! content-kind order, the dynamic suffix and tail, and the prompt-cache state that lets an
//! unchanged prefix skip rendering and hashing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::canonical;
use crate::extension::Segment;
use crate::fold::chain_hash;
use crate::model::{ModelRequest, Purpose};
use crate::tool::Tool;

use super::claim::Claim;
use super::step::Offer;

/// Rendered tool schemas, shared from request to request.
type Schemas = Arc<Vec<Value>>;

/// What this claim last sent, so an unchanged prefix is neither rendered nor hashed again: a
/// step's cost does not grow with what stays the same.
#[derive(Default)]
pub(super) struct PromptCache {
    /// The stable prefix as last sent, and its hash.
    stable: Option<Arc<StablePrefix>>,
    /// The tools last rendered and their schemas.
    rendered: Option<RenderedTools>,
    /// The residents as last sent, and their hash.
    residents: Option<(Vec<String>, String)>,
    /// The tail (reminders) as last sent, and its hash.
    tail: Option<(Vec<String>, canonical::Digest)>,
}

/// The stable prefix last hashed by any claim of one session, so that each turn (a new claim)
/// of a long-lived session does not render and hash the same prefix again.
#[derive(Clone, Default)]
pub(crate) struct SessionPrefix(Arc<Mutex<Option<Arc<StablePrefix>>>>);

impl SessionPrefix {
    fn get(&self) -> Option<Arc<StablePrefix>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, prefix: Arc<StablePrefix>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(prefix);
    }
}

/// A stable prefix as sent: system text, tool schemas, entries, and its hash.
pub(crate) struct StablePrefix {
    system: String,
    tools: Schemas,
    entries: Vec<Value>,
    hash: String,
}

/// The tools last rendered, each with whether it was loaded (held so an unchanged offer is
/// recognised by identity), and their schemas.
struct RenderedTools {
    tools: Vec<(Arc<dyn Tool>, bool)>,
    schemas: Schemas,
}

/// The hash of each segment of a request as sent.
pub(super) struct SegmentHashes {
    /// System text, tool schemas and entries.
    pub(super) stable: String,
    /// The residents.
    pub(super) residents: String,
    /// The conversation and the tail.
    pub(super) dynamic: String,
}

impl Claim<'_> {
    /// The offered tools' schemas; the last rendering again when the offer is the same tools.
    pub(super) fn render_tools(&mut self, offer: &Offer) -> Arc<Vec<Value>> {
        let key: Vec<(Arc<dyn Tool>, bool)> = offer
            .tools
            .iter()
            .map(|t| {
                let loaded = offer.loaded.iter().any(|n| n == t.tool.name());
                (Arc::clone(&t.tool), loaded)
            })
            .collect();
        if let Some(last) = &self.cache.rendered
            && last.tools.len() == key.len()
            && last
                .tools
                .iter()
                .zip(&key)
                .all(|(a, b)| Arc::ptr_eq(&a.0, &b.0) && a.1 == b.1)
        {
            return Arc::clone(&last.schemas);
        }
        let tools: Arc<Vec<Value>> = Arc::new(
            key.iter()
                .map(|(tool, loaded)| {
                    let description = match (loaded, tool.flags().loaded_description) {
                        (true, Some(text)) => text,
                        _ => tool.description().to_owned(),
                    };
                    json!({
                        "name": tool.name(),
                        "description": description,
                        "input_schema": tool.input_schema(),
                    })
                })
                .collect(),
        );
        self.cache.rendered = Some(RenderedTools {
            tools: key,
            schemas: Arc::clone(&tools),
        });
        tools
    }

    pub(super) fn compose(&mut self, offer: &Offer) -> Result<ModelRequest, String> {
        let view = self.view();
        let mut system: Vec<String> = Vec::new();
        // Residents by their kind's place in the layout (no kind: after every kind), then in
        // extension order.
        let kinds = &self.session.kinds;
        let mut placed: Vec<(usize, String)> = Vec::new();
        for (extension, part) in self.hooks().context(&view)? {
            {
                match part.segment {
                    Segment::Stable => system.push(part.text),
                    Segment::Resident => {
                        let rank = match &part.kind {
                            None => kinds.len(),
                            Some(kind) => kinds.iter().position(|k| &k.kind == kind).ok_or_else(|| {
                                let known: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
                                format!(
                                    "extension `{}`: context gave a resident of content kind `{kind}`, which agent `{}` does not have (kinds: {})",
                                    extension,
                                    self.session.spec.name,
                                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                                )
                            })?,
                        };
                        placed.push((rank, part.text));
                    }
                }
            }
        }
        placed.sort_by_key(|(rank, _)| *rank);
        let mut residents: Vec<String> = Vec::with_capacity(placed.len());
        let mut titled = usize::MAX;
        for (rank, text) in placed {
            // A kind's title heads its residents.
            if rank != titled
                && let Some(kind) = kinds.get(rank)
                && !kind.title.is_empty()
            {
                residents.push(kind.title.clone());
                titled = rank;
            }
            residents.push(text);
        }
        let tail = self.hooks().tail(&view);
        let tools = self.render_tools(offer);
        Ok(ModelRequest {
            purpose: Purpose::Step,
            agent: self.session.spec.name.clone(),
            step: self.state.core.assistant_messages,
            system: system.join("\n\n"),
            tools,
            entries: offer.entries.clone(),
            residents,
            messages: Arc::clone(&self.state.core.messages),
            tail,
            attachments: BTreeMap::new(),
        })
    }

    /// The hash of each segment of the request as sent (after `before_model`); the stable
    /// prefix and residents are re-hashed only when they differ from the previous request's.
    pub(super) fn segment_hashes(&mut self, request: &ModelRequest) -> SegmentHashes {
        let same = |last: &StablePrefix| {
            last.system == request.system
                && (Arc::ptr_eq(&last.tools, &request.tools) || last.tools == request.tools)
                && last.entries == request.entries
        };
        let stable = match &self.cache.stable {
            Some(last) if same(last) => last.hash.clone(),
            _ => {
                let shared = self.rt.session_prefix(self.session);
                let prefix = match shared.get() {
                    // Held with this claim's schemas, so its next steps match them by identity.
                    Some(last) if same(&last) => Arc::new(StablePrefix {
                        tools: Arc::clone(&request.tools),
                        system: last.system.clone(),
                        entries: last.entries.clone(),
                        hash: last.hash.clone(),
                    }),
                    _ => {
                        let body = json!({ "system": request.system, "tools": request.tools, "entries": request.entries });
                        let prefix = Arc::new(StablePrefix {
                            system: request.system.clone(),
                            tools: Arc::clone(&request.tools),
                            entries: request.entries.clone(),
                            hash: canonical::sha256_hex(&canonical::to_bytes(&body)),
                        });
                        shared.set(Arc::clone(&prefix));
                        prefix
                    }
                };
                let hash = prefix.hash.clone();
                self.cache.stable = Some(prefix);
                hash
            }
        };
        let residents = match &self.cache.residents {
            Some((texts, hash)) if *texts == request.residents => hash.clone(),
            _ => {
                let hash = canonical::sha256_hex(&canonical::to_bytes(&json!(request.residents)));
                self.cache.residents = Some((request.residents.clone(), hash.clone()));
                hash
            }
        };
        let tail = match &self.cache.tail {
            Some((texts, hash)) if *texts == request.tail => *hash,
            _ => {
                let hash = canonical::Digest::blake3(&[&canonical::to_bytes(&json!(request.tail))]);
                self.cache.tail = Some((request.tail.clone(), hash));
                hash
            }
        };
        // A `before_model` that changed the conversation is hashed as sent.
        let chain = if Arc::ptr_eq(&request.messages, &self.state.core.messages) {
            self.state.core.chain
        } else {
            crate::fold::chain_of(&request.messages)
        };
        SegmentHashes {
            stable,
            residents,
            dynamic: chain_hash(&chain, &tail).to_hex(),
        }
    }
}
