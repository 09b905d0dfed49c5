//! The HTTP side both providers share: the client, one streamed attempt with its deadlines,
//! error classification, and retries with backoff.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use noeta_core::model::ModelReply;
use noeta_core::provider::ProviderError;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use crate::config::ProviderConfig;
use crate::open::ProviderSetupError;

/// How much of an error response body is read.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How long the rest of a finished stream is read, so the connection can be reused.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// What a decoder says after an event.
pub(crate) enum Flow {
    /// Keep reading.
    More,
    /// The reply is complete.
    Done,
}

/// Turns one response's server-sent events into a reply.
pub(crate) trait Decoder {
    /// Takes the next event.
    fn event(&mut self, event: Sse) -> Result<Flow, ProviderError>;
    /// The body ended before the decoder said `Done`: the reply if it is whole anyway.
    fn end_of_body(self) -> Result<ModelReply, ProviderError>;
    /// The reply, after `Done`.
    fn finish(self) -> Result<ModelReply, ProviderError>;
}

/// Where a reply's text goes as it streams in, if anywhere, and whether any went yet.
#[derive(Clone, Copy, Default)]
pub(crate) struct TextOut<'s>(
    pub(crate) Option<&'s noeta_core::provider::TextSink<'s>>,
    pub(crate) Option<&'s std::sync::atomic::AtomicBool>,
);

/// What the sink is told when an attempt that already streamed text is retried.
pub(crate) const STARTS_OVER: &str = "\n[the reply was cut off; it starts over]\n";

impl std::fmt::Debug for TextOut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TextOut(sink)"
        } else {
            "TextOut(none)"
        })
    }
}

impl TextOut<'_> {
    /// Hands a piece of text on.
    pub(crate) fn send(&self, text: &str) {
        if let Some(sink) = self.0
            && !text.is_empty()
        {
            sink(text);
            if let Some(sent) = self.1 {
                sent.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// A new attempt begins: when the last one streamed text, the sink is told it starts over.
    pub(crate) fn attempt(&self) {
        if let (Some(sink), Some(sent)) = (self.0, self.1)
            && sent.swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            sink(STARTS_OVER);
        }
    }
}

/// A request body as bytes; `provider` names it in the error.
pub(crate) fn encode(provider: &str, body: &serde_json::Value) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(body).map_err(|e| ProviderError::Fatal {
        message: format!("{provider}: cannot encode the request: {e}"),
    })
}

/// Standard base64 of `bytes` (images on the wire).
pub(crate) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A transient error.
pub(crate) fn transient(message: String) -> ProviderError {
    ProviderError::Transient {
        message,
        retry_after_ms: None,
    }
}

/// When and how often transient failures are retried.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    pub(crate) max_retries: u32,
    pub(crate) base: Duration,
    pub(crate) max: Duration,
    /// The longest all retries of one call may take.
    pub(crate) max_total: Duration,
    /// Told one line per retry.
    pub(crate) notify: Option<crate::config::Notify>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base", &self.base)
            .field("max", &self.max)
            .field("max_total", &self.max_total)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// The wait before retry `attempt` (from zero): equal jitter over
    /// `min(base · 2^attempt, max)`, so between half of that and all of it.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let step = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.min(31)))
            .min(self.max);
        let half = step / 2;
        half + half.mul_f64(random_fraction())
    }
}

/// A number in [0, 1) from the standard library's randomly keyed hasher.
fn random_fraction() -> f64 {
    let bits = RandomState::new().hash_one(SystemTime::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// Installs ring as the process's TLS crypto provider, once; one installed already stays.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The longest a reachability probe waits for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// One provider's HTTP client and its deadlines.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    name: &'static str,
    idle_timeout: Duration,
    retry: RetryPolicy,
    /// Where the API key came from (`$ANTHROPIC_API_KEY`, `[plugins.providers] api_key`), for a
    /// 401 or 403 to name; `None` without a key.
    key_source: Option<String>,
}

impl Http {
    pub(crate) fn new(
        name: &'static str,
        config: &ProviderConfig,
    ) -> Result<Self, ProviderSetupError> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("noeta/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ProviderSetupError::Client)?;
        Ok(Self {
            client,
            name,
            idle_timeout: config.idle_timeout,
            retry: RetryPolicy {
                max_retries: config.max_retries,
                base: config.retry_base_delay,
                max: config.retry_max_delay,
                max_total: config.max_retry_time,
                notify: config.notify.clone(),
            },
            key_source: None,
        })
    }

    /// The same, naming where its API key came from when the key is refused.
    #[must_use]
    pub(crate) fn with_key_source(mut self, source: Option<String>) -> Self {
        self.key_source = source;
        self
    }

    /// `error` (of a response with `status`) naming the key's source when the key was refused.
    fn naming_key(&self, status: StatusCode, error: ProviderError) -> ProviderError {
        match (status.as_u16(), &self.key_source, error) {
            (401 | 403, Some(source), ProviderError::Fatal { message }) => ProviderError::Fatal {
                message: format!(
                    "{message} — the API key from {source} was refused: check it \
                     (`noeta doctor --online` tries it)"
                ),
            },
            (_, _, error) => error,
        }
    }

    /// One call of `provider`: encodes `body`, streams the answer through decoders `make` builds
    /// around `out` (each attempt telling `out` it begins), and prices the reply.
    #[allow(clippy::too_many_arguments, reason = "one call's whole description")]
    pub(crate) async fn call<'s, D: Decoder>(
        &self,
        provider: &str,
        url: &str,
        headers: &HeaderMap,
        body: &serde_json::Value,
        price: Option<crate::catalog::Price>,
        out: TextOut<'s>,
        make: impl Fn(TextOut<'s>) -> D,
    ) -> Result<ModelReply, ProviderError> {
        let body = encode(provider, body)?;
        let mut reply = self
            .stream(url, headers, &body, || {
                out.attempt();
                make(out)
            })
            .await?;
        reply.usage.cost_micros = crate::catalog::cost_of(price, &reply.usage);
        Ok(reply)
    }

    /// One `GET` of `url` with the provider's `headers` (less those describing a streamed
    /// body): what was answered, or the failure as a model call would report it. Not retried.
    pub(crate) async fn probe(
        &self,
        url: &str,
        headers: &HeaderMap,
    ) -> Result<String, ProviderError> {
        let name = self.name;
        let wait = self.idle_timeout.min(PROBE_TIMEOUT);
        let mut headers = headers.clone();
        headers.remove(reqwest::header::ACCEPT);
        headers.remove(reqwest::header::CONTENT_TYPE);
        let response = self
            .send_within(
                self.client.get(url).headers(headers),
                wait,
                &format!("{name}: GET {url}"),
            )
            .await?;
        let status = response.status();
        if status.is_success() {
            return Ok(format!("GET {url}: HTTP {status}"));
        }
        let answer_headers = response.headers().clone();
        let body = tokio::time::timeout(wait, read_capped(response))
            .await
            .unwrap_or_default();
        Err(self.naming_key(
            status,
            classify_status(
                &format!("{name}: GET {url}"),
                status,
                &answer_headers,
                &body,
            ),
        ))
    }

    /// Sends `request`, waiting at most `wait` for the response's headers; `what` starts the
    /// message when none come.
    async fn send_within(
        &self,
        request: reqwest::RequestBuilder,
        wait: Duration,
        what: &str,
    ) -> Result<reqwest::Response, ProviderError> {
        match tokio::time::timeout(wait, request.send()).await {
            Err(_) => Err(transient(format!(
                "{what}: no response within {}",
                seconds(wait)
            ))),
            Ok(Err(error)) => Err(request_error(self.name, &error)),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Posts `body` to `url` and decodes the streamed answer, retrying transient failures.
    pub(crate) async fn stream<D: Decoder>(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        decoder: impl Fn() -> D,
    ) -> Result<ModelReply, ProviderError> {
        let started = std::time::Instant::now();
        let attempts = self.retry.max_retries.saturating_add(1);
        let mut attempt = 0;
        loop {
            let (message, retry_after_ms) = match self.attempt(url, headers, body, decoder()).await
            {
                Err(ProviderError::Transient {
                    message,
                    retry_after_ms,
                }) => (message, retry_after_ms),
                other => return other,
            };
            let tries = attempt + 1;
            let gave_up = |why: String| ProviderError::Transient {
                message: format!(
                    "{message} — {url}: gave up after {tries} attempt{}{why}",
                    if tries == 1 { "" } else { "s" }
                ),
                retry_after_ms,
            };
            if attempt >= self.retry.max_retries {
                return Err(gave_up(String::new()));
            }
            let wait =
                retry_after_ms.map_or_else(|| self.retry.backoff(attempt), Duration::from_millis);
            if started.elapsed() + wait > self.retry.max_total {
                return Err(gave_up(format!(
                    " in {}: another would end past the retries' limit of {}",
                    seconds(started.elapsed()),
                    seconds(self.retry.max_total)
                )));
            }
            let line = format!(
                "retrying in {}: {message} (attempt {} of {attempts})",
                seconds(wait),
                tries + 1
            );
            tracing::info!("{line}");
            if let Some(notify) = &self.retry.notify {
                notify.tell(&line);
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn attempt<D: Decoder>(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        mut decoder: D,
    ) -> Result<ModelReply, ProviderError> {
        let name = self.name;
        let idle = self.idle_timeout;
        let request = self
            .client
            .post(url)
            .headers(headers.clone())
            .body(body.to_vec());
        let response = self.send_within(request, idle, name).await?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let text = tokio::time::timeout(idle, read_capped(response))
                .await
                .unwrap_or_default();
            return Err(self.naming_key(status, classify_status(name, status, &headers, &text)));
        }
        // A stream is alive while bytes come, whether or not they make an event yet (a
        // keep-alive comment, an event sent a few bytes at a time): the idle limit runs from
        // the last byte.
        let began = tokio::time::Instant::now();
        let last_byte = Arc::new(AtomicU64::new(0));
        let body = {
            let last_byte = last_byte.clone();
            response.bytes_stream().inspect(move |_| {
                let since = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
                last_byte.store(since, Ordering::Relaxed);
            })
        };
        let mut events = SseStream::from_bytes_stream(body);
        loop {
            // Polling the stream again after a timeout loses nothing: its state lives in it.
            let next = loop {
                let quiet_until =
                    began + Duration::from_millis(last_byte.load(Ordering::Relaxed)) + idle;
                if let Ok(next) = tokio::time::timeout_at(quiet_until, events.next()).await {
                    break next;
                }
                let heard = began + Duration::from_millis(last_byte.load(Ordering::Relaxed));
                if heard + idle <= tokio::time::Instant::now() {
                    return Err(transient(format!(
                        "{name}: the stream stalled (no byte for {})",
                        seconds(idle)
                    )));
                }
            };
            match next {
                None => return decoder.end_of_body(),
                Some(Err(error)) => {
                    return Err(transient(format!("{name}: the stream broke: {error}")));
                }
                Some(Ok(event)) => {
                    if let Flow::Done = decoder.event(event)? {
                        let _ = tokio::time::timeout(DRAIN_LIMIT, async {
                            while events.next().await.is_some() {}
                        })
                        .await;
                        return decoder.finish();
                    }
                }
            }
        }
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

/// Reads up to `ERROR_BODY_LIMIT` bytes of a body as text.
async fn read_capped(response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() >= ERROR_BODY_LIMIT {
            bytes.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A failure to send or receive: connection trouble and timeouts are transient.
fn request_error(name: &str, error: &reqwest::Error) -> ProviderError {
    let mut message = format!("{name}: {error}");
    let mut refused = false;
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        refused |= cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        source = cause.source();
    }
    let lower = message.to_lowercase();
    // Retries are for overloads and dropped connections. A closed port or a host name that
    // does not resolve stays so: the run fails at once, saying what to check.
    let unresolved = error.is_connect()
        && (lower.contains("dns error") || lower.contains("failed to lookup address"));
    if error.is_connect() && (refused || lower.contains("connection refused")) {
        let at = error.url().map(|u| format!(" at {u}")).unwrap_or_default();
        return ProviderError::Fatal {
            message: format!(
                "{name}: nothing answers{at} (connection refused) — is the server running, and \
                 is the base URL right? `noeta doctor --online` checks it"
            ),
        };
    }
    if unresolved {
        let at = error
            .url()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        return ProviderError::Fatal {
            message: format!(
                "{name}: the host name `{at}` does not resolve — check the base URL \
                 (`noeta doctor --online` checks it): {message}"
            ),
        };
    }
    if error.is_builder() {
        ProviderError::Fatal { message }
    } else {
        transient(message)
    }
}

/// The error text and code of an error body (`{"error": {"message", "type", "code"}}`, as both
/// APIs and most compatible servers send it), or the raw text.
pub(crate) fn error_details(body: &str) -> (String, Option<String>) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed
        .as_ref()
        .map(|v| v.get("error").unwrap_or(v))
        .filter(|e| e.is_object());
    let Some(error) = error else {
        let text = body.trim();
        return (
            if text.is_empty() {
                "(no error message)".to_owned()
            } else {
                text.chars().take(2_000).collect()
            },
            None,
        );
    };
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    let code = ["code", "type"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    (message, code)
}

/// Whether a provider's words say the request is too long for the model.
pub(crate) fn is_overflow(message: &str, code: Option<&str>) -> bool {
    if matches!(
        code,
        Some("context_length_exceeded" | "exceed_context_size_error" | "request_too_large")
    ) {
        return true;
    }
    let text = message.to_lowercase();
    [
        "prompt is too long",
        "context length",
        "context_length_exceeded",
        "context window",
        "context size",
        "exceed context limit",
        "maximum context",
    ]
    .iter()
    .any(|marker| text.contains(marker))
}

/// The error for a non-success HTTP status.
pub(crate) fn classify_status(
    name: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
) -> ProviderError {
    let (detail, code) = error_details(body);
    let message = match &code {
        Some(code) => format!("{name}: HTTP {status}: {detail} ({code})"),
        None => format!("{name}: HTTP {status}: {detail}"),
    };
    let number = status.as_u16();
    if matches!(number, 400 | 413) && is_overflow(&detail, code.as_deref()) {
        return ProviderError::ContextOverflow { message };
    }
    if matches!(number, 408 | 429) || status.is_server_error() {
        return ProviderError::Transient {
            message,
            retry_after_ms: retry_after_ms(headers, SystemTime::now()),
        };
    }
    ProviderError::Fatal { message }
}

/// The wait a response asks for: `retry-after-ms` (milliseconds), else `Retry-After` as
/// seconds or as an HTTP date (a date in the past means now).
pub(crate) fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(ms.round() as u64);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u64);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let wait = date.duration_since(now).unwrap_or(Duration::ZERO);
    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "3")]), now),
            Some(3_000)
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "0.25")]), now),
            Some(250)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:52 GMT")]),
                now
            ),
            Some(15_000)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]),
                now
            ),
            Some(0)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[("retry-after-ms", "40"), ("retry-after", "9")]),
                now
            ),
            Some(40)
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "-1")]), now),
            None
        );
        assert_eq!(retry_after_ms(&HeaderMap::new(), now), None);
    }

    #[test]
    fn backoff_is_equal_jitter_under_the_cap() {
        let policy = RetryPolicy {
            max_retries: 8,
            base: Duration::from_secs(1),
            max: Duration::from_secs(30),
            max_total: Duration::from_secs(600),
            notify: None,
        };
        for attempt in 0..12 {
            let step = Duration::from_secs(1 << attempt.min(5)).min(Duration::from_secs(30));
            for _ in 0..20 {
                let wait = policy.backoff(attempt);
                assert!(wait >= step / 2 && wait <= step, "{attempt}: {wait:?}");
            }
        }
        assert!(policy.backoff(u32::MAX) <= Duration::from_secs(30));
    }

    #[test]
    fn statuses_map_to_error_kinds() {
        let none = HeaderMap::new();
        let overflow = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            classify_status("anthropic", StatusCode::BAD_REQUEST, &none, overflow),
            ProviderError::ContextOverflow { .. }
        ));
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            classify_status("openai", StatusCode::BAD_REQUEST, &none, openai),
            ProviderError::ContextOverflow { .. }
        ));
        let bad = r#"{"error":{"message":"max_tokens: must be positive","type":"invalid_request_error"}}"#;
        let ProviderError::Fatal { message } =
            classify_status("anthropic", StatusCode::BAD_REQUEST, &none, bad)
        else {
            panic!("400 should be fatal");
        };
        assert!(
            message.contains("max_tokens: must be positive"),
            "{message}"
        );
        for status in [408, 429, 500, 502, 503, 529] {
            let status = StatusCode::from_u16(status).unwrap();
            assert!(matches!(
                classify_status("openai", status, &none, "upstream trouble"),
                ProviderError::Transient { .. }
            ));
        }
        let ProviderError::Fatal { message } =
            classify_status("openai", StatusCode::NOT_FOUND, &none, "")
        else {
            panic!("404 should be fatal");
        };
        assert!(
            message.contains("404") && message.contains("no error message"),
            "{message}"
        );
    }
}
