//! The dashboard (`web/`), served under `/ui/` from the built assets committed in `web/dist`
//! and embedded in the binary (so building Kairon never runs npm). Only `/ui/` has the
//! single-page fallback: any other unknown path stays the JSON 404. Every answer carries a strict
//! Content-Security-Policy: scripts from this origin only, no inline script, no frames.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use include_dir::{Dir, include_dir};

use crate::machines::Error;
use crate::state::AppState;

static DIST: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../web/dist");

/// The dashboard's Content-Security-Policy: no inline or foreign script, no plugins, no frames
/// (the guest HTTP proxy's pages are never rendered on this origin), connections to this origin
/// only (its REST API and WebSockets). Inline styles are allowed for the terminal's renderer.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                       font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; \
                       frame-ancestors 'none'; frame-src 'none'; object-src 'none'";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { asset("index.html") }))
        .route("/ui/{*path}", get(|Path(path): Path<String>| async move { asset(&path) }))
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json" | "map") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A file of the dashboard; a path with no extension is a view of the single-page app and
/// answers `index.html`; a missing file is the JSON 404.
fn asset(path: &str) -> Response {
    let last = path.rsplit('/').next().unwrap_or("");
    let (name, file) = match DIST.get_file(path) {
        Some(f) if !path.contains("..") => (path, f),
        _ if !last.contains('.') => match DIST.get_file("index.html") {
            Some(f) => ("index.html", f),
            None => return missing(path),
        },
        _ => return missing(path),
    };
    let mut resp = file.contents().into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(name)));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Hashed asset names never change content; the page itself is always asked for again.
    let cache = if name.starts_with("assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

fn missing(path: &str) -> Response {
    let mut resp = Error::not_found(format!("no file /ui/{path} in the dashboard")).into_response();
    resp.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    debug_assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    resp
}
