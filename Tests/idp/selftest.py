#!/usr/bin/env python3
"""Self-test of the test IdP, standard library only.

    VENV/bin/python Tests/idp/selftest.py [--keep]

Starts serve.py (with the same interpreter) in a temporary state dir, drives the
code+PKCE, refresh, revocation and device flows over http and https, checks the
protected resource API (/api/me, /api/mailfolders) and the /test/ control endpoints,
and prints "N passed, M failed" (exit 1 on failure).
"""

import base64
import hashlib
import http.client
import http.cookiejar
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
RESULTS = {"passed": 0, "failed": 0}


def check(name, condition, detail=""):
    if condition:
        RESULTS["passed"] += 1
        print(f"ok   {name}")
    else:
        RESULTS["failed"] += 1
        print(f"FAIL {name} {detail}")
    return condition


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_parts(token):
    header, payload, signature = token.split(".")
    return (json.loads(b64url_decode(header)), json.loads(b64url_decode(payload)),
            b64url_decode(signature), f"{header}.{payload}".encode())


def rs256_valid(jwk, signing_input, signature):
    """RSASSA-PKCS1-v1_5 with SHA-256, verified with plain integer arithmetic."""
    n = int.from_bytes(b64url_decode(jwk["n"]), "big")
    e = int.from_bytes(b64url_decode(jwk["e"]), "big")
    k = (n.bit_length() + 7) // 8
    em = pow(int.from_bytes(signature, "big"), e, n).to_bytes(k, "big")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420")
    t = digest_info + hashlib.sha256(signing_input).digest()
    return em == b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # hand 3xx back to the caller, who follows them by hand


class Client:
    """A cookie-keeping HTTP client that never follows redirects by itself."""

    def __init__(self, base, ca_file=None):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        handlers = [urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()]
        if ca_file:
            handlers.append(urllib.request.HTTPSHandler(
                context=ssl.create_default_context(cafile=ca_file)))
        self.opener = urllib.request.build_opener(*handlers)

    def call(self, method, url, form=None, headers=None):
        url = url if "://" in url else self.base + url
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def get_json(self, url, headers=None):
        status, _, body = self.call("GET", url, headers=headers)
        return status, json.loads(body) if body else None

    def post_json(self, url, form=None):
        status, _, body = self.call("POST", url, form=form or {})
        return status, json.loads(body) if body else None

    def cookie(self, name):
        return next((c.value for c in self.jar if c.name == name), None)


def login_and_authorize(client, client_id, redirect_uri, scope, username="alice"):
    """Browser-free code flow: authorize -> login form -> authorize -> captured redirect."""
    verifier = b64url(secrets.token_bytes(32))
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
        "scope": scope, "state": state, "nonce": nonce,
        "code_challenge": b64url(hashlib.sha256(verifier.encode()).digest()),
        "code_challenge_method": "S256",
    })
    status, headers, _ = client.call("GET", "/authorize/?" + query)
    location = headers.get("Location", "")
    if status == 302 and location.startswith("/accounts/login/"):
        status, _, _ = client.call("GET", location)  # sets the csrf cookie
        next_url = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["next"][0]
        status, headers, _ = client.call("POST", "/accounts/login/", form={
            "username": username, "password": f"{username}-password", "next": next_url,
            "csrfmiddlewaretoken": client.cookie("idp_csrftoken") or ""})
        if status != 302:
            raise AssertionError(f"login answered {status}")
        status, headers, _ = client.call("GET", headers["Location"])
        location = headers.get("Location", "")
    if status != 302 or not location.startswith(redirect_uri):
        raise AssertionError(f"authorize answered {status} Location={location!r}")
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    if params.get("state") != [state]:
        raise AssertionError("state mismatch")
    return params["code"][0], verifier, nonce


def exchange(client, client_id, code, verifier, redirect_uri):
    return client.post_json("/token/", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "client_id": client_id, "code_verifier": verifier})


def refresh(client, client_id, refresh_token):
    return client.post_json("/token/", {
        "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id})


def code_flow(client, client_id="brokerd-test-app-a",
              scope="openid profile email offline_access user.read mail.read", host="127.0.0.1"):
    redirect_uri = f"http://{host}:{free_port()}/"
    code, verifier, nonce = login_and_authorize(client, client_id, redirect_uri, scope)
    status, tokens = exchange(client, client_id, code, verifier, redirect_uri)
    if status != 200:
        raise AssertionError(f"token exchange answered {status}: {tokens}")
    return tokens, nonce


# ------------------------------------------------------------------ the tests

def test_discovery(http, https, ready):
    status, doc = http.get_json("/.well-known/openid-configuration")
    check("discovery over http answers 200", status == 200)
    check("http issuer matches ready.json", doc.get("issuer") == ready["issuer_http"], doc.get("issuer"))
    check("discovery names device_authorization_endpoint",
          doc.get("device_authorization_endpoint") == ready["http"] + "/device-authorization/")
    check("discovery names revocation_endpoint",
          doc.get("revocation_endpoint") == ready["http"] + "/revoke_token/")
    check("discovery: S256 only, device grant listed",
          doc.get("code_challenge_methods_supported") == ["S256"]
          and DEVICE_GRANT in doc.get("grant_types_supported", []))
    check("discovery endpoints all on the http listener", all(
        doc[k].startswith(ready["http"] + "/") for k in
        ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint")))
    status, doc2 = https.get_json("/.well-known/openid-configuration")
    check("discovery over https (test CA) answers 200", status == 200)
    check("https issuer matches ready.json", doc2.get("issuer") == ready["issuer_https"])
    check("https discovery endpoints on the https listener", all(
        doc2[k].startswith(ready["https"] + "/") for k in
        ("authorization_endpoint", "token_endpoint", "device_authorization_endpoint", "jwks_uri")))
    status, meta = http.get_json("/.well-known/oauth-authorization-server")
    check("RFC 8414 metadata has device endpoint",
          status == 200 and meta.get("device_authorization_endpoint", "").startswith(ready["http"]))
    try:
        urllib.request.urlopen(ready["https"] + "/", timeout=10,
                               context=ssl.create_default_context())
        check("https is rejected without the test CA", False)
    except urllib.error.URLError as error:
        check("https is rejected without the test CA",
              isinstance(error.reason, ssl.SSLCertVerificationError), repr(error))
    status, jwks = http.get_json("/.well-known/jwks.json")
    return jwks


def test_code_flow(http, ready, jwks):
    tokens, nonce = code_flow(http)
    check("code+PKCE flow returns access, refresh and id tokens",
          all(k in tokens for k in ("access_token", "refresh_token", "id_token"))
          and tokens.get("token_type") == "Bearer", sorted(tokens))
    check("expires_in is the default 3600", tokens.get("expires_in") == 3600, tokens.get("expires_in"))
    header, claims, signature, signing_input = jwt_parts(tokens["id_token"])
    key = next((k for k in jwks["keys"] if k.get("kid") == header.get("kid")), None)
    check("id_token is RS256 with a kid from the JWKS", header.get("alg") == "RS256" and key is not None)
    check("id_token signature verifies", key is not None and rs256_valid(key, signing_input, signature))
    alice_sub = str(uuid.uuid5(uuid.NAMESPACE_URL, "brokerd-test-idp:alice"))
    check("id_token iss/aud/sub/nonce", claims.get("iss") == ready["issuer_http"]
          and claims.get("aud") == "brokerd-test-app-a" and claims.get("sub") == alice_sub
          and claims.get("nonce") == nonce, claims)
    check("id_token has email/preferred_username",
          claims.get("email") == "alice@example.test" and claims.get("preferred_username") == "alice")
    status, me = http.get_json("/api/me", {"Authorization": "Bearer " + tokens["access_token"]})
    check("access token works at /api/me",
          status == 200 and me.get("username") == "alice" and me.get("name") == "Alice Anderson", me)
    status, info = http.get_json("/userinfo/", {"Authorization": "Bearer " + tokens["access_token"]})
    check("userinfo returns alice's sub", status == 200 and info.get("sub") == alice_sub, info)

    # A second authorization in the same session skips the login form.
    tokens2, _ = code_flow(http, client_id="brokerd-test-app-b", scope="openid files.read",
                           host="localhost")
    check("localhost redirect, second client, existing session", "access_token" in tokens2)

    # PKCE is required, and only http loopback redirects are accepted.
    redirect = f"http://127.0.0.1:{free_port()}/"
    status, headers, _ = http.call("GET", "/authorize/?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": "brokerd-test-app-a", "redirect_uri": redirect,
        "scope": "openid", "state": "s"}))
    location = headers.get("Location", "")
    check("authorize without code_challenge is refused",
          status == 302 and "error=invalid_request" in location, location)
    status, headers, _ = http.call("GET", "/authorize/?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": "brokerd-test-app-a",
        "redirect_uri": "http://attacker.example:8080/", "scope": "openid", "state": "s",
        "code_challenge": "x" * 43, "code_challenge_method": "S256"}))
    check("non-loopback redirect_uri is refused without redirecting",
          status == 400 and "Location" not in headers, status)
    return tokens


def test_refresh(http):
    tokens, _ = code_flow(http)
    status, new = refresh(http, "brokerd-test-app-a", tokens["refresh_token"])
    check("refresh_token grant answers 200 with a new access token",
          status == 200 and new.get("access_token") not in (None, tokens["access_token"]), new)
    check("refresh token is rotated", new.get("refresh_token") not in (None, tokens["refresh_token"]))
    check("refresh returns a new id_token", "id_token" in new)
    status, reused = refresh(http, "brokerd-test-app-a", tokens["refresh_token"])
    check("reusing the old refresh token fails with invalid_grant",
          status == 400 and reused.get("error") == "invalid_grant", (status, reused))
    status, after = refresh(http, "brokerd-test-app-a", new["refresh_token"])
    check("reuse detection also revoked the rotated refresh token",
          status == 400 and after.get("error") == "invalid_grant", (status, after))

    # Narrowing the scope on one refresh does not narrow the chain (RFC 6749 section 6).
    tokens, _ = code_flow(http)
    status, narrow = http.post_json("/token/", {
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
        "client_id": "brokerd-test-app-a", "scope": "mail.read"})
    check("refresh with a narrower scope", status == 200 and narrow.get("scope") == "mail.read", narrow)
    status, wide = http.post_json("/token/", {
        "grant_type": "refresh_token", "refresh_token": narrow.get("refresh_token", ""),
        "client_id": "brokerd-test-app-a", "scope": "openid mail.read profile"})
    check("next refresh may ask for originally granted scopes again",
          status == 200 and set(wide.get("scope", "").split()) == {"openid", "mail.read", "profile"},
          wide)
    status, bad = http.post_json("/token/", {
        "grant_type": "refresh_token", "refresh_token": wide.get("refresh_token", ""),
        "client_id": "brokerd-test-app-a", "scope": "files.read"})
    check("refresh asking for a never-granted scope: invalid_scope",
          status == 400 and bad.get("error") == "invalid_scope", bad)

    # RFC 7009 revocation.
    tokens, _ = code_flow(http)
    status, _, body = http.call("POST", "/revoke_token/", form={
        "token": tokens["refresh_token"], "token_type_hint": "refresh_token",
        "client_id": "brokerd-test-app-a"})
    check("revocation endpoint answers 200", status == 200, (status, body))
    status, result = refresh(http, "brokerd-test-app-a", tokens["refresh_token"])
    check("revoked refresh token fails with invalid_grant",
          status == 400 and result.get("error") == "invalid_grant", result)

    # Test-control revocation of every refresh token of a user.
    tokens, _ = code_flow(http)
    status, result = http.post_json("/test/revoke-refresh-tokens?username=alice")
    check("/test/revoke-refresh-tokens revokes", status == 200 and result.get("revoked", 0) >= 1, result)
    status, result = refresh(http, "brokerd-test-app-a", tokens["refresh_token"])
    check("refresh after /test/revoke-refresh-tokens fails with invalid_grant",
          status == 400 and result.get("error") == "invalid_grant", result)


def device_start(http, client_id="brokerd-test-app-c", scope="openid offline_access files.read"):
    return http.post_json("/device-authorization/", {"client_id": client_id, "scope": scope})


def device_poll(http, device_code, client_id="brokerd-test-app-c"):
    return http.post_json("/token/", {"grant_type": DEVICE_GRANT, "device_code": device_code,
                                      "client_id": client_id})


def test_device_flow(http, ready):
    status, start = device_start(http, scope="openid offline_access files.read user.read")
    check("device authorization answers 200", status == 200, start)
    check("device response fields", all(k in start for k in (
        "device_code", "user_code", "verification_uri", "verification_uri_complete",
        "expires_in", "interval")) and start["verification_uri"] == ready["http"] + "/device/", start)
    check("device interval comes from DEVICE_FLOW_INTERVAL", start.get("interval") == 1)
    status, poll = device_poll(http, start["device_code"])
    check("first poll: authorization_pending",
          status == 400 and poll.get("error") == "authorization_pending", (status, poll))
    status, poll = device_poll(http, start["device_code"])
    check("immediate second poll: slow_down", status == 400 and poll.get("error") == "slow_down",
          (status, poll))
    status, result = http.post_json("/test/approve-device?" + urllib.parse.urlencode(
        {"user_code": start["user_code"].lower(), "username": "bob"}))
    check("/test/approve-device approves (case-insensitive code)", status == 200 and result.get("ok"),
          result)
    time.sleep(start["interval"] + 0.1)
    status, tokens = device_poll(http, start["device_code"])
    check("poll after approval returns tokens",
          status == 200 and "access_token" in tokens and "refresh_token" in tokens, (status, tokens))
    status, me = http.get_json("/api/me", {"Authorization": "Bearer " + tokens.get("access_token", "")})
    check("device token belongs to bob", status == 200 and me.get("username") == "bob", me)
    status, new = refresh(http, "brokerd-test-app-c", tokens.get("refresh_token", ""))
    check("device-flow refresh token refreshes", status == 200 and "access_token" in new, new)
    time.sleep(start["interval"] + 0.1)
    status, again = device_poll(http, start["device_code"])
    check("device_code is single-use (expired_token)",
          status == 400 and again.get("error") == "expired_token", (status, again))

    status, body = device_start(http, client_id="no-such-client")
    check("device authorization: unknown client is invalid_client",
          status == 401 and body.get("error") == "invalid_client", (status, body))
    status, body = device_start(http, scope="openid no.such.scope")
    check("device authorization: unknown scope is invalid_scope",
          status == 400 and body.get("error") == "invalid_scope", (status, body))
    status, body = device_poll(http, "no-such-device-code")
    check("unknown device_code polls invalid_grant",
          status == 400 and body.get("error") == "invalid_grant", (status, body))

    status, start = device_start(http, scope="openid")
    http.post_json("/test/deny-device?" + urllib.parse.urlencode({"user_code": start["user_code"]}))
    status, poll = device_poll(http, start["device_code"])
    check("denied device grant polls access_denied",
          status == 400 and poll.get("error") == "access_denied", (status, poll))


def test_control(http, ready):
    check("reset-counters answers 200", http.post_json("/test/reset-counters")[0] == 200)
    tokens, _ = code_flow(http)
    status, new = refresh(http, "brokerd-test-app-a", tokens["refresh_token"])
    refresh(http, "brokerd-test-app-a", "not-a-real-token")
    status, start = device_start(http)
    device_poll(http, start["device_code"])

    status, stats = http.get_json("/test/requests")
    check("/test/requests counts by grant_type", status == 200 and stats["total"] == 4
          and stats["by_grant_type"] == {"authorization_code": 1, "refresh_token": 2, DEVICE_GRANT: 1},
          stats)
    check("/test/requests counts statuses", stats["by_status"] == {"200": 2, "400": 2}, stats["by_status"])
    last = stats["recent"][-1]
    check("recent entries carry grant_type/client_id/status/error",
          last["grant_type"] == DEVICE_GRANT and last["client_id"] == "brokerd-test-app-c"
          and last["status"] == 400 and last["error"] == "authorization_pending", last)
    text = json.dumps(stats)
    secrets_seen = [v for v in (tokens["access_token"], tokens["refresh_token"], new["refresh_token"],
                                start["device_code"], start["user_code"]) if v in text]
    check("/test/requests contains no tokens or codes", not secrets_seen)

    http.post_json("/test/fail-next?status=503&count=1")
    status, failed = refresh(http, "brokerd-test-app-a", new["refresh_token"])
    check("fail-next makes the next token request answer 503", status == 503, (status, failed))
    status, ok = refresh(http, "brokerd-test-app-a", new["refresh_token"])
    check("the request after the injected failure succeeds (token not consumed)", status == 200, ok)
    status, stats = http.get_json("/test/requests?limit=2")
    check("injected failure is recorded", [r["injected"] for r in stats["recent"]] == [True, False]
          and stats["by_status"].get("503") == 1, stats["recent"])

    http.post_json("/test/delay?ms=400&count=1")
    began = time.monotonic()
    status, ok2 = refresh(http, "brokerd-test-app-a", ok["refresh_token"])
    slow = time.monotonic() - began
    began = time.monotonic()
    status, _ = refresh(http, "brokerd-test-app-a", ok2["refresh_token"])
    fast = time.monotonic() - began
    check("delay slows exactly the next token response", slow >= 0.4 and fast < 0.3, (slow, fast))

    status, cfg = http.post_json("/test/config?access_token_expire_seconds=7")
    tokens, _ = code_flow(http)
    check("/test/config changes the access-token lifetime", tokens.get("expires_in") == 7,
          tokens.get("expires_in"))
    http.post_json("/test/config?access_token_expire_seconds=3600")


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_resource_api(http):
    """/api/me (user.read) and /api/mailfolders (mail.read): DOT's token and scope checks."""
    status, headers, body = http.call("GET", "/api/mailfolders")
    check("/api/mailfolders without a token: 401, bare Bearer challenge",
          status == 401 and headers.get("WWW-Authenticate") == "Bearer"
          and json.loads(body).get("error") == "invalid_token", (status, dict(headers), body))
    status, headers, body = http.call("GET", "/api/mailfolders", headers=bearer("not-a-token"))
    check("/api/mailfolders with an unknown token: 401 invalid_token",
          status == 401 and 'error="invalid_token"' in headers.get("WWW-Authenticate", ""), (status, body))

    profile_only, _ = code_flow(http, scope="openid offline_access user.read")
    status, headers, body = http.call("GET", "/api/mailfolders", headers=bearer(profile_only["access_token"]))
    check("/api/mailfolders with a token without mail.read: 403 insufficient_scope",
          status == 403 and json.loads(body).get("error") == "insufficient_scope"
          and 'error="insufficient_scope"' in headers.get("WWW-Authenticate", "")
          and 'scope="mail.read"' in headers.get("WWW-Authenticate", ""), (status, dict(headers), body))
    status, me = http.get_json("/api/me", bearer(profile_only["access_token"]))
    check("/api/me with user.read: 200 with username, name, email",
          status == 200 and me.get("username") == "alice" and me.get("name") == "Alice Anderson"
          and me.get("email") == "alice@example.test", me)

    mail_only, _ = code_flow(http, scope="openid offline_access mail.read")
    status, body = http.get_json("/api/me", bearer(mail_only["access_token"]))
    check("/api/me with a token without user.read: 403 insufficient_scope",
          status == 403 and body.get("error") == "insufficient_scope", (status, body))
    status, folders = http.get_json("/api/mailfolders", bearer(mail_only["access_token"]))
    check("/api/mailfolders with mail.read: 200, alice's three folders",
          status == 200 and folders.get("username") == "alice" and folders.get("count") == 3
          and [(f["name"], f["messages"]) for f in folders.get("folders", [])]
          == [("Inbox", 12), ("Archive", 40), ("Sent", 7)], (status, folders))

    # A refresh narrowed to user.read gives a token that the mail API refuses.
    status, narrow = http.post_json("/token/", {
        "grant_type": "refresh_token", "refresh_token": profile_only["refresh_token"],
        "client_id": "brokerd-test-app-a", "scope": "user.read"})
    status, _, _ = http.call("GET", "/api/mailfolders", headers=bearer(narrow.get("access_token", "")))
    check("refreshed token keeps its scope check (user.read only: 403)", status == 403, status)

    status, _, _ = http.call("POST", "/revoke_token/", form={
        "token": mail_only["access_token"], "token_type_hint": "access_token",
        "client_id": "brokerd-test-app-a"})
    status, _, body = http.call("GET", "/api/mailfolders", headers=bearer(mail_only["access_token"]))
    check("/api/mailfolders with a revoked token: 401", status == 401, (status, body))

    http.post_json("/test/config?access_token_expire_seconds=1")
    try:
        short, _ = code_flow(http, scope="openid mail.read")
    finally:
        http.post_json("/test/config?access_token_expire_seconds=3600")
    time.sleep(1.2)
    status, headers, body = http.call("GET", "/api/mailfolders", headers=bearer(short["access_token"]))
    check("/api/mailfolders with an expired token: 401 invalid_token (expired)",
          status == 401 and "expired" in json.loads(body).get("error_description", ""), (status, body))


def test_https_flow(https, ready, jwks):
    tokens, nonce = code_flow(https, client_id="brokerd-test-app-b")
    _, claims, _, _ = jwt_parts(tokens["id_token"])
    check("code flow over https: id_token iss is the https issuer",
          claims.get("iss") == ready["issuer_https"] and claims.get("nonce") == nonce, claims.get("iss"))
    status, new = refresh(https, "brokerd-test-app-b", tokens["refresh_token"])
    check("refresh over https", status == 200 and "access_token" in new)


def test_keepalive(ready):
    """Many requests on one connection must not stall (TCP_NODELAY, single write)."""
    host, port = urllib.parse.urlsplit(ready["http"]).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    began, sockets = time.monotonic(), set()
    for _ in range(20):
        conn.request("POST", "/token/", body="grant_type=refresh_token&refresh_token=x&client_id=y",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        response.read()
        sockets.add(id(conn.sock))
    average_ms = (time.monotonic() - began) * 1000 / 20
    conn.close()
    check("keep-alive: 20 token requests reuse one connection", len(sockets) == 1)
    check("keep-alive: no delayed-ACK stalls", average_ms < 30, f"{average_ms:.1f} ms/request")


def main():
    keep = "--keep" in sys.argv
    state = Path(tempfile.mkdtemp(prefix="idp-selftest-"))
    env = dict(os.environ, DEVICE_FLOW_INTERVAL="1")
    log = open(state / "server.log", "w")
    began = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "serve.py"), "--state-dir", str(state / "state"), "--watch-stdin"],
        stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
    ready_file = state / "state" / "ready.json"
    try:
        while not ready_file.exists():
            if server.poll() is not None or time.monotonic() - began > 60:
                raise RuntimeError("server did not become ready:\n" + (state / "server.log").read_text())
            time.sleep(0.05)
        ready = json.loads(ready_file.read_text())
        print(f"server ready in {time.monotonic() - began:.1f}s: {ready['http']} {ready['https']}")
        http_client = Client(ready["http"])
        https_client = Client(ready["https"], ca_file=ready["ca"])
        jwks = None
        for name, test in [("discovery", lambda: test_discovery(http_client, https_client, ready)),
                           ("code flow", lambda: test_code_flow(http_client, ready, jwks)),
                           ("refresh", lambda: test_refresh(http_client)),
                           ("device flow", lambda: test_device_flow(http_client, ready)),
                           ("resource api", lambda: test_resource_api(http_client)),
                           ("control", lambda: test_control(http_client, ready)),
                           ("https", lambda: test_https_flow(https_client, ready, jwks)),
                           ("keep-alive", lambda: test_keepalive(ready))]:
            try:
                result = test()
                if name == "discovery":
                    jwks = result
            except Exception:
                check(f"{name}: no exception", False, "\n" + traceback.format_exc())
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=10)
        check("SIGTERM stops the server cleanly", code == 0 and not ready_file.exists(), code)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
        if RESULTS["failed"]:
            print("--- server log ---\n" + (state / "server.log").read_text())
        if keep:
            print(f"state kept in {state}")
        else:
            shutil.rmtree(state, ignore_errors=True)
    print(f"selftest took {time.monotonic() - began:.1f}s")
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    sys.exit(1 if RESULTS["failed"] else 0)


if __name__ == "__main__":
    main()
