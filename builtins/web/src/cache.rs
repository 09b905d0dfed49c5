//! The page cache: fetched pages by URL, in memory, for one plugin instance; entries expire
//! after the configured lifetime on an injectable clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use noeta_core::store::Clock;

/// The most pages kept; the oldest goes first.
pub(crate) const MAX_ENTRIES: usize = 16;

/// A page as fetched and rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    /// The URL after redirects.
    pub(crate) final_url: String,
    /// How many same-host redirects led there.
    pub(crate) redirects: usize,
    /// The HTTP status of the final answer.
    pub(crate) status: u16,
    /// Its media type (without parameters), or empty when it sent none.
    pub(crate) content_type: String,
    /// When it was fetched, in Unix milliseconds.
    pub(crate) fetched_at_ms: u64,
    /// The bytes read of its body.
    pub(crate) bytes: usize,
    /// Whether the body was cut at the download cap.
    pub(crate) cut: bool,
    /// The content as Markdown (HTML converted, text as it is).
    pub(crate) text: Arc<str>,
}

/// Fetched pages by the URL asked for (after the https upgrade).
pub(crate) struct PageCache {
    ttl: Duration,
    clock: Arc<dyn Clock>,
    pages: Mutex<BTreeMap<String, Page>>,
}

impl PageCache {
    pub(crate) fn new(ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            ttl,
            clock,
            pages: Mutex::new(BTreeMap::new()),
        }
    }

    /// The clock's time now, in Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Page>> {
        // Each change is one insert or removal: a panic cannot leave the map half-changed.
        self.pages.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The page cached for `url`, while it is fresh; an expired one is dropped.
    pub(crate) fn get(&self, url: &str) -> Option<Page> {
        let now = self.now_ms();
        let ttl = self.ttl_ms();
        let mut pages = self.lock();
        let page = pages.get(url)?;
        if now.saturating_sub(page.fetched_at_ms) < ttl {
            return Some(page.clone());
        }
        pages.remove(url);
        None
    }

    /// Keeps `page` for `url` (not at all with a zero lifetime); the oldest page leaves when
    /// the cache is full.
    pub(crate) fn put(&self, url: &str, page: Page) {
        if self.ttl.is_zero() {
            return;
        }
        let now = self.now_ms();
        let ttl = self.ttl_ms();
        let mut pages = self.lock();
        pages.retain(|_, p| now.saturating_sub(p.fetched_at_ms) < ttl);
        if !pages.contains_key(url)
            && pages.len() >= MAX_ENTRIES
            && let Some(oldest) = pages
                .iter()
                .min_by_key(|(key, p)| (p.fetched_at_ms, (*key).clone()))
                .map(|(key, _)| key.clone())
        {
            pages.remove(&oldest);
        }
        pages.insert(url.to_owned(), page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use noeta_core::store::ManualClock;

    fn page(at: u64) -> Page {
        Page {
            final_url: "https://x/".into(),
            redirects: 0,
            status: 200,
            content_type: "text/plain".into(),
            fetched_at_ms: at,
            bytes: 1,
            cut: false,
            text: Arc::from("x"),
        }
    }

    #[test]
    fn a_page_is_served_until_it_expires() {
        let clock = ManualClock::at(1_000);
        let cache = PageCache::new(Duration::from_secs(60), clock.clone());
        cache.put("u", page(1_000));
        clock.advance(59_999);
        assert!(cache.get("u").is_some());
        clock.advance(1);
        assert!(cache.get("u").is_none());
    }

    #[test]
    fn a_zero_lifetime_keeps_nothing() {
        let cache = PageCache::new(Duration::ZERO, ManualClock::at(0));
        cache.put("u", page(0));
        assert!(cache.get("u").is_none());
    }

    #[test]
    fn the_oldest_page_leaves_a_full_cache() {
        let clock = ManualClock::at(0);
        let cache = PageCache::new(Duration::from_secs(3600), clock.clone());
        for n in 0..MAX_ENTRIES {
            cache.put(&format!("u{n}"), page(clock.now_ms()));
            clock.advance(10);
        }
        cache.put("new", page(clock.now_ms()));
        assert!(cache.get("u0").is_none());
        assert!(cache.get("u1").is_some());
        assert!(cache.get("new").is_some());
    }
}
