//! Tests of `card_signing`: RFC 8785 vectors, signatures that verify, and tampering that is caught.

use super::*;
use crate::model::v1::{AgentCapabilities, AgentInterface, AgentSkill};
use ring::signature::UnparsedPublicKey;
use serde_json::json;

const ES256: &str = include_str!("testdata/card-es256.pem");
const RSA: &str = include_str!("testdata/card-rsa.pem");
const SEC1: &str = include_str!("testdata/card-sec1.pem");

fn card() -> AgentCard {
    AgentCard {
        name: "Example Agent".into(),
        description: "Prüft Karten €".into(),
        supported_interfaces: vec![AgentInterface {
            url: "http://127.0.0.1:1/".into(),
            protocol_binding: "JSONRPC".into(),
            tenant: String::new(),
            protocol_version: "1.0".into(),
        }],
        provider: None,
        version: "1.0.0".into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: vec![],
            extended_agent_card: None,
        },
        security_schemes: Default::default(),
        security_requirements: vec![],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "echoes".into(),
            tags: vec![],
            examples: vec![],
            input_modes: vec![],
            output_modes: vec![],
            security_requirements: vec![],
        }],
        signatures: vec![],
        icon_url: None,
    }
}

/// Verify the first signature of `card` against its canonical payload with the key of `signer`'s
/// JWK.
fn verify(signer: &CardSigner, card: &AgentCard) -> Result<(), ring::error::Unspecified> {
    verify_with(signer, card, 0, &canonical_payload(card).unwrap())
}

/// Verify signature `index` of `card` over `payload`.
fn verify_with(
    signer: &CardSigner,
    card: &AgentCard,
    index: usize,
    payload: &[u8],
) -> Result<(), ring::error::Unspecified> {
    let jwk = signer.public_jwk();
    let d = |k: &str| URL_SAFE_NO_PAD.decode(jwk[k].as_str().unwrap()).unwrap();
    let signature = &card.signatures[index];
    let input = format!(
        "{}.{}",
        signature.protected,
        URL_SAFE_NO_PAD.encode(payload)
    );
    let sig = URL_SAFE_NO_PAD.decode(&signature.signature).unwrap();
    match signer.algorithm() {
        "ES256" => {
            let mut point = vec![4];
            point.extend(d("x"));
            point.extend(d("y"));
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(input.as_bytes(), &sig)
        }
        "RS256" => ring::rsa::PublicKeyComponents {
            n: d("n"),
            e: d("e"),
        }
        .verify(
            &signature::RSA_PKCS1_2048_8192_SHA256,
            input.as_bytes(),
            &sig,
        ),
        "EdDSA" => {
            UnparsedPublicKey::new(&signature::ED25519, d("x")).verify(input.as_bytes(), &sig)
        }
        other => panic!("no verifier for {other}"),
    }
}

#[test]
fn jcs_matches_the_rfc_8785_sample_of_section_3_2_2() {
    // RFC 8785 §3.2.2: the input, and the canonical output of §3.2.3 byte for byte.
    let input: Value = serde_json::from_str(
        r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#,
    )
    .unwrap();
    let expected = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
    assert_eq!(
        String::from_utf8(canonical_json(&input).unwrap()).unwrap(),
        expected
    );
}

#[test]
fn jcs_sorts_keys_by_utf16_code_units_as_rfc_8785_section_3_2_3_shows() {
    let input: Value = serde_json::from_str(
        r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"}"#,
    )
    .unwrap();
    let canonical = String::from_utf8(canonical_json(&input).unwrap()).unwrap();
    let order: Vec<&str> = [
        "Carriage", "One", "Control", "Latin", "Euro", "Emoji", "Hebrew",
    ]
    .into_iter()
    .collect();
    let positions: Vec<usize> = order.iter().map(|w| canonical.find(w).unwrap()).collect();
    assert!(positions.windows(2).all(|p| p[0] < p[1]), "{canonical}");
}

#[test]
fn the_payload_is_the_canonical_1_0_card_without_signatures() {
    let signer = CardSigner::from_pem(ES256).unwrap();
    let signed = signer.sign(card()).unwrap();
    let payload = String::from_utf8(canonical_payload(&signed).unwrap()).unwrap();
    assert!(!payload.contains("signatures"), "{payload}");
    assert!(payload.starts_with("{\"capabilities\":{\"pushNotifications\":false,\"streaming\":true},\"defaultInputModes\""), "{payload}");
    assert_eq!(canonical_payload(&card()).unwrap(), payload.into_bytes());
}

#[test]
fn an_es256_signature_verifies_and_names_alg_typ_and_kid() {
    let signer = CardSigner::from_pem(ES256)
        .unwrap()
        .with_jwks_url("https://example.com/jwks.json");
    assert_eq!(signer.algorithm(), "ES256");
    let signed = signer.sign(card()).unwrap();
    verify(&signer, &signed).expect("the signature verifies");
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(&signed.signatures[0].protected)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        header,
        json!({"alg": "ES256", "typ": "JOSE", "kid": signer.key_id(), "jku": "https://example.com/jwks.json"})
    );
    // The default kid is the RFC 7638 thumbprint: 43 base64url characters of a SHA-256.
    assert_eq!(signer.key_id().len(), 43, "{}", signer.key_id());
}

#[test]
fn rs256_and_eddsa_signatures_verify() {
    let rsa = CardSigner::from_pem(RSA).unwrap().with_key_id("rsa-1");
    assert_eq!(rsa.algorithm(), "RS256");
    verify(&rsa, &rsa.sign(card()).unwrap()).expect("RS256 verifies");

    let pkcs8 = signature::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        STANDARD.encode(pkcs8.as_ref())
    );
    let ed = CardSigner::from_pem(&pem).unwrap();
    assert_eq!(ed.algorithm(), "EdDSA");
    verify(&ed, &ed.sign(card()).unwrap()).expect("EdDSA verifies");
}

#[test]
fn a_changed_card_or_signature_no_longer_verifies() {
    let signer = CardSigner::from_pem(ES256).unwrap();
    let signed = signer.sign(card()).unwrap();
    let mut tampered = signed.clone();
    tampered.skills[0].description = "echoes, and more".into();
    assert!(
        verify(&signer, &tampered).is_err(),
        "a changed skill is caught"
    );
    let mut tampered = signed.clone();
    tampered.supported_interfaces[0].url = "http://evil.example/".into();
    assert!(
        verify(&signer, &tampered).is_err(),
        "a changed URL is caught"
    );
    let mut tampered = signed.clone();
    tampered.signatures[0].protected =
        URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "typ": "JOSE", "kid": "other"}).to_string());
    assert!(
        verify(&signer, &tampered).is_err(),
        "a changed header is caught"
    );
    // Adding signatures does not change what the first ones signed.
    let twice = signer.sign(signed.clone()).unwrap();
    assert_eq!(twice.signatures.len(), 2 * signed.signatures.len());
    assert_eq!(
        canonical_payload(&twice).unwrap(),
        canonical_payload(&signed).unwrap()
    );
}

#[test]
fn keys_that_are_not_pkcs8_or_not_supported_are_clear_errors() {
    let e = CardSigner::from_pem(SEC1).unwrap_err();
    assert_eq!(
        e,
        SigningError::NotPkcs8 {
            label: "EC PRIVATE KEY".into()
        }
    );
    assert!(e.to_string().contains("openssl pkcs8 -topk8"), "{e}");
    assert!(matches!(
        CardSigner::from_pem("not a key"),
        Err(SigningError::NotPem(_))
    ));
    assert!(matches!(
        CardSigner::from_pem("-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----"),
        Err(SigningError::NotPem(_))
    ));
    assert_eq!(
        CardSigner::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
            .unwrap_err(),
        SigningError::UnsupportedKey
    );
    let debug = format!("{:?}", CardSigner::from_pem(ES256).unwrap());
    assert!(
        debug.contains("ES256") && !debug.contains("BEGIN"),
        "{debug}"
    );
}

#[test]
fn a_second_signature_covers_the_form_the_python_sdk_verifies_when_it_differs() {
    let signer = CardSigner::from_pem(ES256).unwrap();
    // `card()` has an empty required list (`tags`): the 1.x SDK's form differs (and the 0.3 SDK's,
    // a third signature, always does).
    let signed = signer.sign(card()).unwrap();
    assert_eq!(signed.signatures.len(), 3);
    let sdk = python_sdk_payload(&signed).unwrap();
    let text = String::from_utf8(sdk.clone()).unwrap();
    assert!(!text.contains("tags"), "empty lists are dropped: {text}");
    assert!(
        text.contains("Prüft Karten €"),
        "UTF-8 as RFC 8785 writes it: {text}"
    );
    verify_with(&signer, &signed, 1, &sdk).expect("the second signature covers the SDK's form");
    assert!(verify_with(&signer, &signed, 1, &canonical_payload(&signed).unwrap()).is_err());

    // A card with nothing empty: no signature for the 1.x form, the same bytes as the spec's.
    let mut plain = card();
    plain.skills[0].tags = vec!["t".into()];
    assert_eq!(
        python_sdk_payload(&plain).unwrap(),
        canonical_payload(&plain).unwrap()
    );
    assert_eq!(
        signer.sign(plain).unwrap().signatures.len(),
        2,
        "the spec's form and the 0.3 SDK's"
    );

    // The bearer requirement without scopes: kept by §8.4.1, dropped by the SDK.
    let mut bearer = card();
    bearer.security_requirements = vec![crate::model::v1::SecurityRequirement {
        schemes: [("bearer".to_owned(), Default::default())].into(),
    }];
    let spec = String::from_utf8(canonical_payload(&bearer).unwrap()).unwrap();
    let sdk = String::from_utf8(python_sdk_payload(&bearer).unwrap()).unwrap();
    assert!(
        spec.contains(r#""securityRequirements":[{"schemes":{"bearer":{}}}]"#),
        "{spec}"
    );
    assert!(!sdk.contains("securityRequirements"), "{sdk}");
}

#[test]
fn the_0_3_form_is_the_card_as_the_0_3_sdk_models_dump_it() {
    let mut card = card();
    card.skills[0].tags = vec!["t".into()];
    card.security_schemes = [(
        "bearer".to_owned(),
        crate::model::v1::SecurityScheme::HttpAuth(crate::model::v1::HttpAuthSecurityScheme {
            description: String::new(),
            scheme: "Bearer".into(),
            bearer_format: String::new(),
        }),
    )]
    .into();
    let text = String::from_utf8(python_sdk_0_3_payload(&card).unwrap()).unwrap();
    // Pinned byte for byte: what `canonicalize_agent_card` of a2a-sdk 0.3 gives for this card (its
    // defaults `protocolVersion` 0.3.0, `preferredTransport` JSONRPC and each scheme's `type` left
    // out; 1.0-only members unknown to its models; non-ASCII escaped).
    assert_eq!(
        text,
        r#"{"capabilities":{"pushNotifications":false,"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"description":"Pr\u00fcft Karten \u20ac","name":"Example Agent","securitySchemes":{"bearer":{"scheme":"Bearer"}},"skills":[{"description":"echoes","id":"echo","name":"Echo","tags":["t"]}],"url":"http://127.0.0.1:1/","version":"1.0.0"}"#
    );
    let signer = CardSigner::from_pem(ES256).unwrap();
    let signed = signer.sign(card).unwrap();
    assert_eq!(
        signed.signatures.len(),
        2,
        "the 1.x form is the spec's here"
    );
    verify_with(&signer, &signed, 1, text.as_bytes()).expect("the 0.3 form is signed");
}
