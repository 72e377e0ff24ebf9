//! The console's files, embedded in the binary: its stylesheet, its script and Mermaid (vendored
//! from the npm registry, gzipped; `console/README.md` says how to refresh it and `.ci/run` checks
//! it is the published file). Nothing is loaded from anywhere else.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// The Mermaid release vendored (its file name carries it, so it can be cached for good).
pub(super) const MERMAID_VERSION: &str = "11.17.2";

/// One embedded file.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    body: &'static [u8],
    /// `body` is gzip-compressed (sent with `Content-Encoding: gzip`).
    gzipped: bool,
}

const CSS: &[u8] = include_bytes!("../../../console/console.css");
const JS: &[u8] = include_bytes!("../../../console/console.js");
const MERMAID: &[u8] = include_bytes!("../../../console/mermaid.min.js.gz");

static ASSETS: LazyLock<Vec<(Asset, String)>> = LazyLock::new(|| {
    [
        Asset {
            name: "console.css",
            media_type: "text/css; charset=utf-8",
            body: CSS,
            gzipped: false,
        },
        Asset {
            name: "console.js",
            media_type: "text/javascript; charset=utf-8",
            body: JS,
            gzipped: false,
        },
        Asset {
            name: "mermaid-11.17.2.min.js",
            media_type: "text/javascript; charset=utf-8",
            body: MERMAID,
            gzipped: true,
        },
    ]
    .into_iter()
    .map(|asset| {
        let digest = Sha256::digest(asset.body);
        let etag = format!("\"{}\"", hex(&digest[..12]));
        (asset, etag)
    })
    .collect()
});

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The URL of the embedded file `name` (`console.css`, `console.js`, `mermaid.js`), with its
/// digest, so that a new binary's file is never taken from a browser's cache.
pub(super) fn path(name: &str) -> String {
    let name = match name {
        "mermaid.js" => format!("mermaid-{MERMAID_VERSION}.min.js"),
        other => other.to_owned(),
    };
    match ASSETS.iter().find(|(asset, _)| asset.name == name) {
        Some((_, etag)) => format!("/console/assets/{name}?v={}", etag.trim_matches('"')),
        None => format!("/console/assets/{name}"),
    }
}

/// `GET /console/assets/{name}`: the file, cached by the browser for a year (its URL changes
/// with its content); 304 for a matching `If-None-Match`; 404 for a name that is not one.
pub(super) async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some((asset, etag)) = ASSETS.iter().find(|(asset, _)| asset.name == name) else {
        return (StatusCode::NOT_FOUND, "no such console file").into_response();
    };
    let cache = [
        (header::ETAG, etag.clone()),
        (
            header::CACHE_CONTROL,
            "public, max-age=31536000, immutable".to_owned(),
        ),
    ];
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag))
    {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    if asset.gzipped {
        let accepts = headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
        if !accepts {
            return (
                StatusCode::NOT_ACCEPTABLE,
                "this file is served gzip-compressed only: send `Accept-Encoding: gzip`",
            )
                .into_response();
        }
        return (
            cache,
            [
                (header::CONTENT_TYPE, asset.media_type),
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            asset.body,
        )
            .into_response();
    }
    (
        cache,
        [(header::CONTENT_TYPE, asset.media_type)],
        asset.body,
    )
        .into_response()
}
