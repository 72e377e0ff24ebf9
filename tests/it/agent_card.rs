//! The agent card of `radkit serve` as clients read it: one document that the official 0.3 and
//! 1.x Python SDKs both accept with a bearer token on (`tests/python/card_check.py`), the extended
//! card for token holders over JSON-RPC 1.0, REST and 0.3, and signed cards that an independent
//! implementation verifies. Without the Python SDKs (`.venv`, `.venv1`; see `services`) their tests
//! are reported ignored.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::common;
use crate::support::services;
use common::{rpc, Server};

const TOKEN: &str = "s3cret";
const SDK_LIMIT: Duration = Duration::from_secs(120);

/// The test key (PKCS#8 P-256) the runtime's unit tests sign with.
fn key() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("radkit-runtime/src/model/testdata/card-es256.pem")
}

/// An extended card file in `dir`: one more skill and another description.
fn extended_file(dir: &Path) -> PathBuf {
    let path = dir.join("extended.json");
    let extended = json!({
        "description": "The same agent, as its members see it (für Mitglieder).",
        "skills": [{"id": "members-only", "name": "Members only", "description": "Listed for token holders.", "tags": ["members"]}]
    });
    std::fs::write(&path, extended.to_string()).unwrap();
    path
}

/// `radkit serve` with a token, an extended card and a signing key, over `dir`.
fn full_server(dir: &Path) -> Server {
    let ext = extended_file(dir);
    let key = key();
    common::serve(&[
        "--data-dir",
        dir.to_str().unwrap(),
        "--default-skill",
        "conformance",
        "--token",
        &format!("{TOKEN}=alice"),
        "--extended-card",
        ext.to_str().unwrap(),
        "--card-key",
        key.to_str().unwrap(),
        "--card-key-id",
        "test-key",
    ])
}

fn run_check(python: String, args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/card_check.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).args(args);
    let out = common::output_within(cmd, SDK_LIMIT, "the python card check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "python card check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test(needs = Python)]
fn official_python_sdk_0_3_reads_the_card_with_a_token_and_gets_the_extended_card() {
    let dir = tempfile::tempdir().unwrap();
    let server = full_server(dir.path());
    let key = key();
    run_check(
        services::python(),
        &["0.3", &server.url, TOKEN, key.to_str().unwrap()],
    );
}

#[test(needs = Python1)]
fn official_python_sdk_1_x_reads_the_signed_card_with_a_token_and_gets_the_extended_card() {
    let dir = tempfile::tempdir().unwrap();
    let server = full_server(dir.path());
    let key = key();
    run_check(
        services::python1(),
        &["1.x", &server.url, TOKEN, key.to_str().unwrap()],
    );
}

#[test(needs = Python1)]
fn official_python_sdk_1_x_signature_verifier_accepts_a_signed_card() {
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let server = common::serve(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--card-key",
        key.to_str().unwrap(),
    ]);
    run_check(
        services::python1(),
        &["1.x-signed", &server.url, "-", key.to_str().unwrap()],
    );
}

async fn get(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = client.get(url).header("A2A-Version", "1.0");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The card document a client that names no version gets (the one both versions read).
async fn card(client: &reqwest::Client, url: &str) -> Value {
    let response = client
        .get(format!("{url}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

/// A 1.0 JSON-RPC call.
async fn rpc_v1(client: &reqwest::Client, url: &str, method: &str, token: Option<&str>) -> Value {
    let mut request = client
        .post(format!("{url}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().json().await.unwrap()
}

fn skill_ids(card: &Value) -> Vec<String> {
    card["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
async fn the_extended_card_is_served_to_token_holders_over_every_binding_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let server = full_server(dir.path());
    let client = reqwest::Client::new();
    let url = &server.url;

    let public = card(&client, url).await;
    assert_eq!(
        public["capabilities"]["extendedAgentCard"], true,
        "{public}"
    );
    assert_eq!(
        public["supportsAuthenticatedExtendedCard"], true,
        "{public}"
    );
    assert!(!skill_ids(&public).contains(&"members-only".to_owned()));

    let over_rpc = rpc_v1(&client, url, "GetExtendedAgentCard", Some(TOKEN)).await;
    let card = &over_rpc["result"];
    assert!(
        skill_ids(card).contains(&"members-only".to_owned()),
        "{over_rpc}"
    );
    assert!(
        skill_ids(card).contains(&"conformance".to_owned()),
        "{over_rpc}"
    );
    assert_eq!(
        card["description"],
        "The same agent, as its members see it (für Mitglieder)."
    );
    assert!(
        card.get("protocolVersion").is_none(),
        "1.0 answers carry the 1.0 card: {card}"
    );
    // Signed three times: per spec 1.0 §8.4.1, and in the forms the Python SDKs 1.x (it drops the
    // bearer requirement's empty `{}`) and 0.3 (its 0.3 reading) verify.
    assert_eq!(
        card["signatures"].as_array().map(Vec::len),
        Some(3),
        "{card}"
    );

    let (status, over_rest) = get(&client, &format!("{url}/extendedAgentCard"), Some(TOKEN)).await;
    assert_eq!(status, 200, "{over_rest}");
    assert_eq!(&over_rest, card, "REST and JSON-RPC answer the same card");

    let old = rpc(
        &client,
        url,
        Some(TOKEN),
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    )
    .await;
    assert!(
        skill_ids(&old["result"]).contains(&"members-only".to_owned()),
        "{old}"
    );
    assert_eq!(
        old["result"]["protocolVersion"], "0.3.0",
        "0.3 answers carry the 0.3 members: {old}"
    );

    // Without a token: refused before any operation runs.
    let (status, body) = get(&client, &format!("{url}/extendedAgentCard"), None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body}");
    let response = client
        .post(format!("{url}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
}

#[test]
async fn the_public_card_is_signed_and_declares_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let server = full_server(dir.path());
    let client = reqwest::Client::new();
    let card = card(&client, &server.url).await;
    assert_eq!(
        card["securitySchemes"]["bearer"],
        json!({
            "httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A token configured with `radkit serve --token`."},
            "type": "http", "scheme": "Bearer", "description": "A token configured with `radkit serve --token`."
        })
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {}}}])
    );
    assert_eq!(card["security"], json!([{"bearer": []}]));
    let signatures = card["signatures"].as_array().expect("signatures");
    assert_eq!(
        signatures.len(),
        3,
        "the spec's form and the Python SDKs' 1.x and 0.3 forms"
    );
    let protected = signatures[0]["protected"].as_str().unwrap();
    let header: Value = serde_json::from_slice(&base64_url(protected)).unwrap();
    assert_eq!(
        header,
        json!({"alg": "ES256", "typ": "JOSE", "kid": "test-key"})
    );
    // The public key is published as a JWK Set, under the kid the signatures name.
    let (status, jwks) = get(
        &client,
        &format!("{}/.well-known/jwks.json", server.url),
        None,
    )
    .await;
    assert_eq!(status, 200, "{jwks}");
    let jwk = &jwks["keys"][0];
    assert_eq!(
        (&jwk["kty"], &jwk["crv"], &jwk["kid"], &jwk["alg"]),
        (
            &json!("EC"),
            &json!("P-256"),
            &json!("test-key"),
            &json!("ES256")
        ),
        "{jwks}"
    );
    assert!(jwk.get("d").is_none(), "never the private key: {jwks}");
    // The signature covers the 1.0 card: the same card without its 0.3 members and signatures.
    let v1: radkit::model::v1::AgentCard = serde_json::from_value(card.clone()).unwrap();
    let payload = radkit::model::canonical_payload(&v1).unwrap();
    let text = String::from_utf8(payload).unwrap();
    assert!(
        !text.contains("protocolVersion\":\"0.3.0") && !text.contains("\"security\":"),
        "{text}"
    );
}

#[test]
async fn the_public_card_is_cacheable_and_revalidates_with_its_etag() {
    let dir = tempfile::tempdir().unwrap();
    let signed = full_server(dir.path());
    let other_dir = tempfile::tempdir().unwrap();
    let plain = common::serve(&["--data-dir", other_dir.path().to_str().unwrap()]);
    let client = reqwest::Client::new();
    let card_url = |server: &Server| format!("{}/.well-known/agent-card.json", server.url);

    let first = client.get(card_url(&signed)).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(
        header(&first, "cache-control").as_deref(),
        Some("public, max-age=300")
    );
    assert_eq!(
        header(&first, "content-type").as_deref(),
        Some("application/json")
    );
    let etag = header(&first, "etag").expect("an ETag");
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["capabilities"]["streaming"], true);

    // The same card again: the same tag, and a conditional request is 304 without a body.
    let again = client.get(card_url(&signed)).send().await.unwrap();
    assert_eq!(header(&again, "etag"), Some(etag.clone()));
    for if_none_match in [etag.clone(), format!("\"x\", W/{etag}"), "*".to_owned()] {
        let revalidated = client
            .get(card_url(&signed))
            .header("if-none-match", &if_none_match)
            .send()
            .await
            .unwrap();
        assert_eq!(revalidated.status().as_u16(), 304, "{if_none_match}");
        assert_eq!(header(&revalidated, "etag"), Some(etag.clone()));
        assert!(revalidated.bytes().await.unwrap().is_empty());
    }
    let stale = client
        .get(card_url(&signed))
        .header("if-none-match", "\"another\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status().as_u16(), 200);

    // Another card, another tag.
    let other = client.get(card_url(&plain)).send().await.unwrap();
    assert_ne!(header(&other, "etag"), Some(etag));
}

/// The members of a 1.0 card (`lf.a2a.v1.AgentCard`) and of its security schemes: what a strict
/// 1.0 validator allows.
const V1_CARD_MEMBERS: &[&str] = &[
    "name",
    "description",
    "supportedInterfaces",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "securitySchemes",
    "securityRequirements",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "signatures",
    "iconUrl",
];

fn assert_1_0_only(card: &Value) {
    for key in card.as_object().expect("an object").keys() {
        assert!(V1_CARD_MEMBERS.contains(&key.as_str()), "`{key}` in {card}");
    }
    for (name, scheme) in card["securitySchemes"].as_object().into_iter().flatten() {
        assert_eq!(
            scheme.as_object().map(|o| o.len()),
            Some(1),
            "{name}: {scheme}"
        );
    }
    for skill in card["skills"].as_array().into_iter().flatten() {
        assert!(skill.get("security").is_none(), "{skill}");
    }
}

#[test]
async fn a_1_0_request_gets_the_1_0_card_alone_as_does_every_request_with_card_1_0_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = full_server(dir.path());
    let client = reqwest::Client::new();
    let url = format!("{}/.well-known/agent-card.json", server.url);
    let both = client.get(&url).send().await.unwrap();
    let v1 = client
        .get(&url)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(v1.headers()["vary"], "A2A-Version");
    assert_ne!(
        both.headers()["etag"],
        v1.headers()["etag"],
        "two documents, two tags"
    );
    let (both, v1): (Value, Value) = (both.json().await.unwrap(), v1.json().await.unwrap());
    assert_1_0_only(&v1);
    assert_eq!(
        v1["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A token configured with `radkit serve --token`."}})
    );
    assert_eq!(v1["signatures"], both["signatures"], "the same signed card");
    let read = |doc: &Value| -> radkit::model::v1::AgentCard {
        serde_json::from_value(doc.clone()).unwrap()
    };
    assert_eq!(
        read(&v1),
        read(&both),
        "a 1.0 reader gets the same card from either"
    );
    let by_query = client
        .get(format!("{url}?A2A-Version=1.0"))
        .send()
        .await
        .unwrap();
    assert_1_0_only(&by_query.json().await.unwrap());

    let only_dir = tempfile::tempdir().unwrap();
    let only = common::serve(&[
        "--data-dir",
        only_dir.path().to_str().unwrap(),
        "--token",
        TOKEN,
        "--card-1-0-only",
    ]);
    let card: Value = client
        .get(format!("{}/.well-known/agent-card.json", only.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_1_0_only(&card);
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {}}}])
    );
}

fn base64_url(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .unwrap()
}

#[test]
fn serve_refuses_an_extended_card_without_a_token_or_a_bad_card_file() {
    let dir = tempfile::tempdir().unwrap();
    let ext = extended_file(dir.path());
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"skills": [{"id": "x"}]}"#).unwrap();
    let sec1 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("radkit-runtime/src/model/testdata/card-sec1.pem");
    let data = dir.path().to_str().unwrap();
    for (args, says) in [
        (
            vec!["--extended-card", ext.to_str().unwrap()],
            "--extended-card needs --token",
        ),
        (
            vec!["--token", TOKEN, "--extended-card", bad.to_str().unwrap()],
            "`skills[0]`",
        ),
        (
            vec!["--card-key", sec1.to_str().unwrap()],
            "openssl pkcs8 -topk8",
        ),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_radkit"));
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--data-dir", data])
            .args(&args)
            .env_remove("RADKIT_TOKENS");
        let out = common::output_within(cmd, Duration::from_secs(60), "radkit serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} served");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
