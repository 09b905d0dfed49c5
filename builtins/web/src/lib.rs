//! The `web` built-in plugin: reading the web with `WebFetch` and `WebSearch`.
//!
//! Its session pack (`web`, priority 200) mounts `WebFetch` (`fetch.rs`) always and
//! `WebSearch` (`search.rs`) only when `[plugins.web]` holds a `search_api_key`: without a key
//! the tool is not offered at all. `WebFetch` reads one page: http upgraded to https except on
//! loopback hosts (`target.rs`), redirects followed within one host only and at most five
//! times, the body read up to a cap and, for HTML, converted to Markdown without scripts and
//! styles (`convert.rs`); pages are cached per plugin instance for 15 minutes (`cache.rs`).
//! The call's `prompt` is answered by an auxiliary model call over the page; without a model,
//! or when it fails, the page itself is returned, cut to a bound, with a note. Every result
//! starts with a provenance line. The settings are read in `settings.rs`.

mod cache;
mod convert;
mod fetch;
mod http;
mod search;
mod settings;
mod target;

use std::sync::Arc;

use noeta_core::{
    LinkedPlugin, PackContribution, RefTable, Resolved, SessionBuildContext, SessionPackFactory,
};

pub use fetch::{MAX_REDIRECTS, PROVENANCE, WEB_FETCH, WebFetch};
pub use search::{WEB_SEARCH, WebSearch};
pub use settings::{
    CACHE_TTL_SECS, MAX_BYTES, MAX_CONTENT_CHARS, SEARCH_ENDPOINT, Settings, TIMEOUT_SECS,
    USER_AGENT,
};

/// The plugin's name (and its settings table, `[plugins.web]`).
pub const PLUGIN: &str = "web";

/// Mounts `WebFetch`, and `WebSearch` when there is a search key. Each built pack is one
/// plugin instance, with its own page cache.
struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let settings = Settings::parse(ctx.config(PLUGIN))?;
        let mut pack = PackContribution::empty();
        // Both tools are built whatever the agent's tool list says: the session build drops
        // the ones it leaves out, and an instance may be shared by agents with other lists.
        pack.tools.push(Arc::new(WebFetch::new(settings.clone())?));
        if settings.search_api_key.is_some() {
            pack.tools.push(Arc::new(WebSearch::new(settings)?));
        }
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_web::web", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}
