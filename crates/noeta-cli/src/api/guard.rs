//! What every request to `noeta serve` passes before it is routed: the `Host` is the server's
//! own (no DNS rebinding), a browser's state-changing request comes from the server's own page
//! (no cross-site forgery), and an API request carries the token; and the security headers of
//! every answer.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::routes::Fail;
use super::{Shared, token};

/// The Content-Security-Policy of every answer: nothing but this server's own scripts, styles
/// and API; no inline code, no frames, no forms posted elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Adds the security headers to every answer, the page's and the refusals' included.
pub(super) async fn secure(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    response
}

fn text(request: &Request, name: header::HeaderName) -> Option<&str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Why a request that changes something is refused as a possible cross-site request forgery,
/// if it is: a body that is not JSON (a browser sends JSON across sites only after a preflight
/// this server never grants), a `Sec-Fetch-Site` other than the server's own, or an `Origin`
/// that is not this server's.
fn forged(api: &Shared, request: &Request, host: &str) -> Option<Fail> {
    let json = text(request, header::CONTENT_TYPE)
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Some(Fail(
            StatusCode::FORBIDDEN,
            "a POST must carry `Content-Type: application/json`".to_owned(),
        ));
    }
    if text(request, header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|site| site != "same-origin" && site != "none")
    {
        return Some(Fail(
            StatusCode::FORBIDDEN,
            "a request from another site is refused".to_owned(),
        ));
    }
    api.hosts
        .check_origin(text(request, header::ORIGIN), host)
        .err()
        .map(|refusal| Fail(StatusCode::FORBIDDEN, refusal.reason))
}

/// Refuses a request for another `Host` (before anything else, the page and the event streams
/// included), a request that changes something from another site, and an API request without
/// the token. The page and its files need no token: they hold no data.
pub(super) async fn guard(State(api): State<Shared>, request: Request, next: Next) -> Response {
    let host = text(&request, header::HOST).map(str::to_owned);
    if let Err(refusal) = api.hosts.check_host(host.as_deref()) {
        let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::FORBIDDEN);
        return Fail(status, refusal.reason).into_response();
    }
    let host = host.unwrap_or_default();
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    if !reads && let Some(refused) = forged(&api, &request, &host) {
        return refused.into_response();
    }
    if !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    if !noeta_toolkit::bearer_matches(text(&request, header::AUTHORIZATION), &api.token) {
        return Fail(
            StatusCode::UNAUTHORIZED,
            format!(
                "this server needs `Authorization: Bearer <token>`: the token of {} when it is \
                 set, else the one in ~/.noeta/{} (the page's address as `noeta serve` prints \
                 it carries it too)",
                super::TOKEN_SETTING,
                token::TOKEN_FILE
            ),
        )
        .into_response();
    }
    next.run(request).await
}
