"""The official A2A Python SDKs read radkit's agent card: 0.3 (pydantic models) and 1.x (protobuf,
its 0.3 compatibility shim), with a bearer token, an extended card and a signed card. Prints ALL
PASSED when every check held.

Usage:
  python card_check.py 0.3 <base url> <token> <pem>   (a server with --token, --extended-card and
                                                      --card-key <pem>)
  python card_check.py 1.x <base url> <token> <pem>   (the same server, signed with <pem>)
  python card_check.py 1.x-signed <base url> - <pem>  (a server without tokens, signed with <pem>)
"""

import asyncio
import base64
import json
import sys
import traceback

import httpx

MODE, BASE, TOKEN = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
PEM = sys.argv[4] if len(sys.argv) > 4 else None
FAILED = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail and not ok else ""))
    if not ok:
        FAILED.append(what)


async def v0_3():
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import HTTPAuthSecurityScheme

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=30) as anonymous, httpx.AsyncClient(timeout=30, headers=headers) as http:
        card = await A2ACardResolver(anonymous, BASE).get_agent_card()
        check("0.3: the card validates", card.protocol_version == "0.3.0" and card.url.rstrip("/") == BASE, card.url)
        scheme = card.security_schemes["bearer"].root
        check("0.3: bearer is an HTTP scheme", isinstance(scheme, HTTPAuthSecurityScheme) and scheme.scheme.lower() == "bearer", scheme)
        check("0.3: security requires bearer", card.security == [{"bearer": []}], card.security)
        check("0.3: supportsAuthenticatedExtendedCard", card.supports_authenticated_extended_card is True)
        check("0.3: the public card lacks the members-only skill", "members-only" not in [s.id for s in card.skills])
        # The 0.3 SDK's own signature verifier: it canonicalizes its 0.3 reading of the card, which
        # one of radkit's signatures covers.
        from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

        verifier = create_signature_verifier(lambda kid, jku: public_key(), ["ES256"])
        try:
            verifier(card)
            check("0.3: the SDK's signature verifier accepts the card", True)
        except InvalidSignaturesError as e:
            check("0.3: the SDK's signature verifier accepts the card", False, repr(e))
        tampered = card.model_copy(update={"description": "tampered"})
        try:
            verifier(tampered)
            check("0.3: the SDK's verifier refuses a tampered card", False)
        except InvalidSignaturesError:
            check("0.3: the SDK's verifier refuses a tampered card", True)
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        extended = await client.get_card(signature_verifier=verifier)
        check("0.3: the extended card over agent/getAuthenticatedExtendedCard", "members-only" in [s.id for s in extended.skills], [s.id for s in extended.skills])
        body = {"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard", "params": {}}
        refused = await anonymous.post(BASE + "/", json=body)
        check("0.3: without a token the extended card is refused with 401", refused.status_code == 401, refused.status_code)


def public_key():
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    text = open(PEM, "rb").read()
    return load_pem_private_key(text[text.index(b"-----BEGIN"):], password=None).public_key()


def spec_verify(card):
    """Spec 1.0 §8.4.3 by hand: the card as a 1.0 client reads it, without signatures, in RFC 8785
    form (sorted keys, no whitespace; radkit's cards hold no floats), against ES256 with the key."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    from google.protobuf.json_format import MessageToDict

    payload = MessageToDict(card)
    payload.pop("signatures", None)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    unb64 = lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    sig = card.signatures[0]
    header = json.loads(unb64(sig.protected))
    raw = unb64(sig.signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        public_key().verify(der, f"{sig.protected}.{b64(canonical)}".encode(), ec.ECDSA(hashes.SHA256()))
        return header
    except Exception as e:  # cryptography's InvalidSignature
        return e


async def v1(signed_only):
    import a2a.types as T
    from a2a.client import A2ACardResolver, ClientConfig, create_client
    from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

    async with httpx.AsyncClient(timeout=30) as anonymous:
        card = await A2ACardResolver(anonymous, BASE).get_agent_card()
        result = spec_verify(card)
        check("1.x: the signature verifies (spec 8.4.3 with cryptography)", isinstance(result, dict), result)
        check("1.x: the protected header names ES256, JOSE and the kid", isinstance(result, dict) and result.get("alg") == "ES256" and result.get("typ") == "JOSE" and result.get("kid"), result)
        card.name = card.name + " (tampered)"
        check("1.x: a tampered card does not verify", not isinstance(spec_verify(card), dict))
        if signed_only:
            # The SDK's own verifier agrees, and catches tampering; its key provider takes the key
            # from the JWK Set radkit publishes, by the signature's kid.
            from jwt.api_jwk import PyJWK

            jwks = (await anonymous.get(BASE + "/.well-known/jwks.json")).json()
            check("1.x: the JWK Set holds one public key", len(jwks["keys"]) == 1 and "d" not in jwks["keys"][0], jwks)
            provider = lambda kid, jku: PyJWK([k for k in jwks["keys"] if k["kid"] == kid][0])
            verifier = create_signature_verifier(provider, ["ES256"])
            card = await A2ACardResolver(anonymous, BASE).get_agent_card(signature_verifier=verifier)
            check("1.x: the SDK's signature verifier accepts the card", len(card.signatures) >= 1)
            card.description = "tampered"
            try:
                verifier(card)
                check("1.x: the SDK's verifier refuses a tampered card", False)
            except InvalidSignaturesError:
                check("1.x: the SDK's verifier refuses a tampered card", True)
            return
        # The SDK's own verifier: it canonicalizes differently from spec 8.4.1 (the empty `{}` of
        # the bearer requirement dropped), which radkit's second signature covers.
        verifier = create_signature_verifier(lambda kid, jku: public_key(), ["ES256"])
        card = await A2ACardResolver(anonymous, BASE).get_agent_card(signature_verifier=verifier)
        check("1.x: the SDK's verifier accepts the card of a server with a token", len(card.signatures) == 3, len(card.signatures))
        scheme = card.security_schemes["bearer"]
        check("1.x: bearer is an httpAuthSecurityScheme", scheme.WhichOneof("scheme") == "http_auth_security_scheme" and scheme.http_auth_security_scheme.scheme == "Bearer", scheme)
        check("1.x: securityRequirements names bearer", [list(r.schemes) for r in card.security_requirements] == [["bearer"]], card.security_requirements)
        check("1.x: capabilities.extendedAgentCard", card.capabilities.extended_agent_card is True)
        bindings = [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]
        check("1.x: supportedInterfaces lists JSONRPC and HTTP+JSON 1.0 and JSONRPC 0.3", ("JSONRPC", "1.0") in bindings and ("HTTP+JSON", "1.0") in bindings and ("JSONRPC", "0.3") in bindings, bindings)

    headers = {"Authorization": f"Bearer {TOKEN}"}
    for binding in ["JSONRPC", "HTTP+JSON"]:
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            client = await create_client(BASE, client_config=ClientConfig(supported_protocol_bindings=[binding], streaming=False, httpx_client=http))
            extended = await client.get_extended_agent_card(T.GetExtendedAgentCardRequest())
            ids = [s.id for s in extended.skills]
            check(f"{binding}: GetExtendedAgentCard adds the members-only skill", "members-only" in ids, ids)
            check(f"{binding}: the extended card is signed too", len(extended.signatures) == 3 and isinstance(spec_verify(extended), dict))
            verifier = create_signature_verifier(lambda kid, jku: public_key(), ["ES256"])
            try:
                verifier(extended)
                check(f"{binding}: the SDK's verifier accepts the extended card (with non-ASCII text)", "für" in extended.description, extended.description)
            except InvalidSignaturesError as e:
                check(f"{binding}: the SDK's verifier accepts the extended card (with non-ASCII text)", False, repr(e))
            await client.close()
    async with httpx.AsyncClient(timeout=30) as anonymous:
        refused = await anonymous.get(BASE + "/extendedAgentCard", headers={"A2A-Version": "1.0"})
        check("HTTP+JSON: without a token the extended card is 401", refused.status_code == 401, refused.status_code)


async def main():
    try:
        if MODE == "0.3":
            await v0_3()
        else:
            await v1(MODE == "1.x-signed")
    except Exception:
        traceback.print_exc()
        FAILED.append("raised")
    print("ALL PASSED" if not FAILED else f"FAILED: {FAILED}")
    sys.exit(1 if FAILED else 0)


asyncio.run(main())
