#!/usr/bin/env python3
"""Self-test of the Entra ID test emulator (entra.py), standard library only.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.

    python3 Tests/entra/selftest.py [--keep]

Starts entra.py in a temporary state dir, exercises every feature over http and https and
prints "N passed, M failed" as its last line (exit 1 on any failure). --keep leaves the state dir.
"""

import base64
import hashlib
import http.client
import http.server
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
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CONTOSO = "11111111-1111-1111-1111-111111111111"
FABRIKAM = "22222222-2222-2222-2222-222222222222"
MSA = "9188040d-6c67-4c5b-b112-36a304b66dad"
B2C = "33333333-3333-3333-3333-333333333333"
FAM_A = "aaaaaaaa-0000-0000-0000-00000000000a"
FAM_B = "bbbbbbbb-0000-0000-0000-00000000000b"
CLIENT_C = "cccccccc-0000-0000-0000-00000000000c"
ALICE_OID = "a1ce0000-0000-4000-8000-000000000001"
ALICE_GUEST_OID = "a1ce0000-0000-4000-8000-0000000000f2"
REDIRECT = "http://127.0.0.1:53123/"
MSAL_SCOPES = "openid profile offline_access"
RESULTS = {"passed": 0, "failed": 0}
SECRETS = set()  # every code / token the tests saw: none may show up in /test/requests


def check(name, condition, detail=""):
    if condition:
        RESULTS["passed"] += 1
        print("ok   " + name)
    else:
        RESULTS["failed"] += 1
        print("FAIL %s %s" % (name, detail))
    return condition


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_parts(token):
    header, payload, signature = token.split(".")
    return (json.loads(b64url_decode(header)), json.loads(b64url_decode(payload)),
            b64url_decode(signature), ("%s.%s" % (header, payload)).encode())


def rs256_valid(jwk, signing_input, signature):
    """RSASSA-PKCS1-v1_5 / SHA-256 verification with plain integer arithmetic."""
    n = int.from_bytes(b64url_decode(jwk["n"]), "big")
    e = int.from_bytes(b64url_decode(jwk["e"]), "big")
    k = (n.bit_length() + 7) // 8
    em = pow(int.from_bytes(signature, "big"), e, n).to_bytes(k, "big")
    t = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(signing_input).digest()
    return em == b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t


def client_info(value):
    return json.loads(b64url_decode(value))


class Client:
    """One keep-alive connection to the emulator, with a cookie jar and no redirect following."""

    def __init__(self, base, ca=None):
        parsed = urllib.parse.urlparse(base)
        self.base, self.scheme, self.netloc = base, parsed.scheme, parsed.netloc
        self.context = ssl.create_default_context(cafile=ca) if parsed.scheme == "https" else None
        self.conn, self.connects, self.cookies = None, 0, {}

    def _connect(self):
        if self.scheme == "https":
            self.conn = http.client.HTTPSConnection(self.netloc, timeout=30, context=self.context)
        else:
            self.conn = http.client.HTTPConnection(self.netloc, timeout=30)
        self.connects += 1

    def request(self, method, target, form=None, headers=None):
        url = target if target.startswith("http") else self.base + target
        parsed = urllib.parse.urlparse(url)
        path = parsed.path + ("?" + parsed.query if parsed.query else "")
        body = urllib.parse.urlencode(form).encode() if isinstance(form, dict) else form
        hdrs = dict(headers or {})
        if body is not None:
            hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if self.cookies:
            hdrs["Cookie"] = "; ".join("%s=%s" % kv for kv in self.cookies.items())
        for attempt in (0, 1):
            if self.conn is None:
                self._connect()
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                response = self.conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                cookie = value.split(";", 1)[0]
                key, _, val = cookie.partition("=")
                if val:
                    self.cookies[key] = val
                else:
                    self.cookies.pop(key, None)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def json(self, method, target, form=None, headers=None):
        status, hdrs, data = self.request(method, target, form, headers)
        try:
            return status, json.loads(data), hdrs
        except ValueError:
            return status, {"_raw": data.decode(errors="replace")}, hdrs


def pkce():
    verifier = b64url(secrets.token_bytes(32))
    return verifier, b64url(hashlib.sha256(verifier.encode()).digest())


def authorize_url(authority, client_id, verifier_challenge, scope=MSAL_SCOPES, **extra):
    params = {"client_id": client_id, "response_type": "code", "redirect_uri": REDIRECT, "scope": scope,
              "state": secrets.token_hex(8), "nonce": secrets.token_hex(8), "code_challenge": verifier_challenge,
              "code_challenge_method": "S256", "client_info": "1"}
    params.update(extra)
    return "/%s/oauth2/v2.0/authorize?%s" % (authority, urllib.parse.urlencode(params)), params


def location_params(headers):
    location = headers.get("location", "")
    parsed = urllib.parse.urlparse(location)
    return location, {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query).items()}


def sign_in(c, authority, client_id, user=None, scope=MSAL_SCOPES, form_login=False, token_path=None, **extra):
    """Code flow with PKCE; returns (token JSON, status, authorize params)."""
    verifier, challenge = pkce()
    url, params = authorize_url(authority, client_id, challenge, scope, **extra)
    if form_login:
        status, headers, page = c.request("GET", url)
        if status != 200 or b"<form" not in page:
            return {"_error": "no form", "_status": status}, status, params
        status, headers, _ = c.request("POST", url, {"username": user, "password": user.split("@")[0] + "-password",
                                                     "action": "signin"})
    else:
        if user:
            url += "&" + urllib.parse.urlencode({"test_user": user})
        status, headers, _ = c.request("GET", url)
    location, query = location_params(headers)
    if status != 302 or "code" not in query or query.get("state") != params["state"]:
        return {"_error": "no code", "_status": status, "_location": location.split("?")[0], "_query": query}, status, params
    SECRETS.add(query["code"])
    status, body, _ = c.json("POST", token_path or "/%s/oauth2/v2.0/token" % authority, {
        "grant_type": "authorization_code", "client_id": client_id, "code": query["code"], "redirect_uri": REDIRECT,
        "code_verifier": verifier, "scope": scope, "client_info": "1"})
    for key in ("access_token", "refresh_token", "id_token"):
        if key in body:
            SECRETS.add(body[key])
    return body, status, params


def refresh(c, authority, client_id, rt, scope=MSAL_SCOPES, **extra):
    form = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": rt, "scope": scope, "client_info": "1"}
    form.update(extra)
    status, body, headers = c.json("POST", "/%s/oauth2/v2.0/token" % authority, form)
    for key in ("access_token", "refresh_token", "id_token"):
        if key in body:
            SECRETS.add(body[key])
    return status, body, headers


def start_server(state_dir):
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "entra.py"), "--state-dir", state_dir,
                                "--san", "login.microsoftonline.com"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = process.stdout.readline()
    if not line.startswith("ENTRA READY "):
        print(line + process.stdout.read())
        raise SystemExit("the emulator did not start")
    return process, json.loads(line[len("ENTRA READY "):])


# ------------------------------------------------------------------------------------------------------------------

def test_startup(ready, state_dir, elapsed):
    with open(os.path.join(state_dir, "ready.json")) as f:
        on_disk = json.load(f)
    check("ready.json equals the READY line", on_disk == ready, str(on_disk))
    check("ready.json names http, https, ca, pid", set(ready) >= {"http", "https", "ca", "pid"} and
          ready["http"].startswith("http://127.0.0.1:") and ready["https"].startswith("https://127.0.0.1:") and
          os.path.exists(ready["ca"]), str(ready))
    print("     startup took %.2f s" % elapsed)


def test_discovery(c):
    base = c.base
    expectations = [
        (CONTOSO, CONTOSO, "%s/%s/v2.0" % (base, CONTOSO)),
        ("contoso.example", CONTOSO, "%s/%s/v2.0" % (base, CONTOSO)),
        ("fabrikam.example", FABRIKAM, "%s/%s/v2.0" % (base, FABRIKAM)),
        ("common", "common", base + "/{tenantid}/v2.0"),
        ("organizations", "organizations", base + "/{tenantid}/v2.0"),
        ("consumers", "consumers", "%s/%s/v2.0" % (base, MSA)),
    ]
    for segment, path_tenant, issuer in expectations:
        status, doc, _ = c.json("GET", "/%s/v2.0/.well-known/openid-configuration" % segment)
        prefix = "%s/%s/oauth2/v2.0/" % (base, path_tenant)
        check("discovery %s: issuer %s" % (segment, issuer.replace(base, "<base>")),
              status == 200 and doc.get("issuer") == issuer, "%s %s" % (status, doc.get("issuer")))
        check("discovery %s: endpoints under /%s/" % (segment, path_tenant),
              doc.get("authorization_endpoint") == prefix + "authorize" and doc.get("token_endpoint") == prefix + "token"
              and doc.get("device_authorization_endpoint") == prefix + "devicecode"
              and doc.get("jwks_uri") == "%s/%s/discovery/v2.0/keys" % (base, path_tenant), json.dumps(doc)[:300])
    status, doc, _ = c.json("GET", "/contoso.example/v2.0/.well-known/openid-configuration")
    check("discovery: Entra fields", doc.get("tenant_region_scope") == "NA" and doc.get("cloud_instance_name") ==
          "microsoftonline.com" and "RS256" in doc.get("id_token_signing_alg_values_supported", []), str(doc)[:200])
    status, err, _ = c.json("GET", "/nosuch.example/v2.0/.well-known/openid-configuration",
                            headers={"client-request-id": "12345678-aaaa-bbbb-cccc-1234567890ab"})
    check("unknown tenant: 400 invalid_tenant AADSTS90002", status == 400 and err.get("error") == "invalid_tenant"
          and err.get("error_codes") == [90002] and err["error_description"].startswith("AADSTS90002: Tenant 'nosuch.example'"),
          "%s %s" % (status, err))
    check("unknown tenant: correlation_id echoes client-request-id",
          err.get("correlation_id") == "12345678-aaaa-bbbb-cccc-1234567890ab", str(err.get("correlation_id")))
    status, err, _ = c.json("GET", "/nosuch.example/oauth2/v2.0/token")
    check("unknown tenant at the token endpoint: AADSTS90002", status == 400 and err.get("error_codes") == [90002])


def test_instance_discovery(c):
    status, doc, _ = c.json("GET", "/common/discovery/instance?" + urllib.parse.urlencode({
        "api-version": "1.1", "authorization_endpoint": "https://login.microsoftonline.com/contoso.example/oauth2/v2.0/authorize"}))
    public = doc.get("metadata", [{}])[0]
    check("instance discovery: public cloud aliases", status == 200 and public == {
        "preferred_network": "login.microsoftonline.com", "preferred_cache": "login.windows.net",
        "aliases": ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"]}, str(doc)[:300])
    aliases = {a for m in doc.get("metadata", []) for a in m["aliases"]}
    check("instance discovery: China and US Gov clouds", {"login.chinacloudapi.cn", "login.partner.microsoftonline.cn",
                                                          "login.microsoftonline.us", "login.usgovcloudapi.net"} <= aliases)
    check("instance discovery: tenant_discovery_endpoint, api-version",
          doc.get("tenant_discovery_endpoint") == c.base + "/contoso.example/v2.0/.well-known/openid-configuration"
          and doc.get("api-version") == "1.1", str(doc.get("tenant_discovery_endpoint")))
    status, err, _ = c.json("GET", "/common/discovery/instance?api-version=1.1&authorization_endpoint=" +
                            urllib.parse.quote("https://login.evil.example/common/oauth2/v2.0/authorize"))
    check("instance discovery: unknown host -> invalid_instance", status == 400 and err.get("error") == "invalid_instance")


def test_keys(c):
    status, jwks, _ = c.json("GET", "/contoso.example/discovery/v2.0/keys")
    key = (jwks.get("keys") or [{}])[0]
    check("JWKS: one RSA key with kid == x5t and x5c", status == 200 and key.get("kty") == "RSA" and
          key.get("kid") == key.get("x5t") and key.get("x5c") and key.get("issuer") == "%s/%s/v2.0" % (c.base, CONTOSO))
    return key


def test_code_flow(c, jwk):
    verifier, challenge = pkce()
    url, params = authorize_url("contoso.example", FAM_A, challenge,
                                "https://graph.microsoft.com/User.Read " + MSAL_SCOPES, login_hint="alice@contoso.example")
    status, _, page = c.request("GET", url)
    check("authorize: login form", status == 200 and b'name="password"' in page and b"alice@contoso.example" in page)
    status, _, page = c.request("POST", url, {"username": "alice@contoso.example", "password": "wrong"})
    check("authorize: wrong password -> form again with AADSTS50126", status == 200 and b"AADSTS50126" in page)
    status, headers, _ = c.request("POST", url, {"username": "alice@contoso.example", "password": "alice-password"})
    location, query = location_params(headers)
    check("authorize: 302 to the loopback with code and state", status == 302 and location.startswith(REDIRECT)
          and query.get("code") and query.get("state") == params["state"], location.split("?")[0])
    check("authorize: client_info on the redirect", client_info(query.get("client_info", "e30")).get("uid") == ALICE_OID)
    code = query.get("code", "")
    SECRETS.add(code)
    token_path = "/contoso.example/oauth2/v2.0/token"
    form = {"grant_type": "authorization_code", "client_id": FAM_A, "code": code, "redirect_uri": REDIRECT,
            "code_verifier": "x" * 43, "client_info": "1"}
    status, err, _ = c.json("POST", token_path, form)
    check("token: wrong code_verifier -> invalid_grant AADSTS50148", status == 400 and err.get("error") == "invalid_grant"
          and err.get("error_codes") == [50148], str(err)[:200])
    form["code_verifier"] = verifier
    status, body, headers = c.json("POST", token_path, form)
    for key in ("access_token", "refresh_token", "id_token"):
        SECRETS.add(body.get(key, "-"))
    check("token: 200 with the v2 fields", status == 200 and body.get("token_type") == "Bearer" and
          isinstance(body.get("expires_in"), int) and isinstance(body.get("ext_expires_in"), int) and
          all(body.get(k) for k in ("access_token", "refresh_token", "id_token", "client_info")), str(body)[:300])
    check("token: scope is the granted v2 scopes", body.get("scope") == "https://graph.microsoft.com/User.Read openid profile",
          body.get("scope"))
    check("token: Cache-Control no-store", headers.get("cache-control") == "no-store")
    check("token: family client gets foci 1", body.get("foci") == "1")
    check("token: client_info uid/utid = home", client_info(body["client_info"]) == {"uid": ALICE_OID, "utid": CONTOSO})
    header, claims, signature, signing_input = jwt_parts(body["id_token"])
    check("id_token: RS256 with the JWKS key", header.get("alg") == "RS256" and header.get("kid") == jwk["kid"]
          and rs256_valid(jwk, signing_input, signature))
    check("id_token: claims", claims.get("iss") == "%s/%s/v2.0" % (c.base, CONTOSO) and claims.get("aud") == FAM_A
          and claims.get("tid") == CONTOSO and claims.get("oid") == ALICE_OID and claims.get("ver") == "2.0"
          and claims.get("nonce") == params["nonce"] and claims.get("preferred_username") == "alice@contoso.example"
          and claims.get("name") == "Alice Anderson" and claims.get("sub") and claims["exp"] > claims["iat"], str(claims))
    _, at, at_sig, at_input = jwt_parts(body["access_token"])
    check("access_token: JWT naming user, tid, aud, scp", at.get("aud") == "https://graph.microsoft.com" and
          at.get("tid") == CONTOSO and at.get("oid") == ALICE_OID and at.get("scp") == "User.Read" and
          at.get("preferred_username") == "alice@contoso.example" and rs256_valid(jwk, at_input, at_sig), str(at))
    status, err, _ = c.json("POST", token_path, form)
    check("token: code reuse -> invalid_grant AADSTS54005", status == 400 and err.get("error_codes") == [54005])
    status, info, _ = c.json("GET", "/oidc/userinfo", headers={"Authorization": "Bearer " + body["access_token"]})
    check("userinfo with the access token", status == 200 and info.get("name") == "Alice Anderson", str(info))

    # the session cookie: SSO without the form, prompt=login shows the form, prompt=none without session fails
    _, challenge = pkce()
    url, params = authorize_url("contoso.example", FAM_B, challenge)
    status, headers, _ = c.request("GET", url)
    check("authorize: session cookie signs in without the form", status == 302 and "code" in location_params(headers)[1])
    url, _ = authorize_url("contoso.example", FAM_B, challenge, prompt="login")
    status, _, page = c.request("GET", url)
    check("authorize: prompt=login shows the form despite the session", status == 200 and b"<form" in page)
    fresh = Client(c.base)
    url, params = authorize_url("contoso.example", FAM_B, challenge, prompt="none")
    status, headers, _ = fresh.request("GET", url)
    query = location_params(headers)[1]
    check("authorize: prompt=none without session -> login_required", status == 302 and
          query.get("error") == "login_required" and query.get("state") == params["state"], str(query))
    url, params = authorize_url("contoso.example", FAM_B, challenge)
    status, headers, _ = fresh.request("POST", url, {"action": "decline"})
    check("authorize: Cancel -> access_denied", location_params(headers)[1].get("error") == "access_denied")
    url, _ = authorize_url("contoso.example", FAM_B, challenge, redirect_uri="https://evil.example/cb")
    status, headers, _ = fresh.request("GET", url)
    check("authorize: non-loopback redirect_uri -> 400 page, no redirect", status == 400 and "location" not in headers)
    url, _ = authorize_url("contoso.example", FAM_B, challenge)
    status, headers, _ = fresh.request("GET", url.replace("code_challenge=", "x="))
    check("authorize: PKCE required", location_params(headers)[1].get("error") == "invalid_request")
    url, _ = authorize_url("contoso.example", "dddddddd-0000-0000-0000-00000000000d", challenge)
    status, _, page = fresh.request("GET", url)
    check("authorize: unknown client -> 400 AADSTS700016", status == 400 and b"AADSTS700016" in page)
    url, _ = authorize_url("contoso.example", FAM_B, challenge, response_mode="form_post")
    status, _, page = fresh.request("GET", url + "&test_user=bob%40contoso.example")
    check("authorize: response_mode=form_post", status == 200 and b'name="code"' in page and REDIRECT.encode() in page)


def test_guest(c):
    body, status, _ = sign_in(c, "fabrikam.example", FAM_A, "alice@contoso.example")
    claims = jwt_parts(body.get("id_token", "e30.e30.e30"))[1] if status == 200 else {}
    check("guest: alice at fabrikam signs in", status == 200, str(body)[:200])
    check("guest: id_token tid/oid are fabrikam's", claims.get("tid") == FABRIKAM and claims.get("oid") == ALICE_GUEST_OID
          and claims.get("iss") == "%s/%s/v2.0" % (c.base, FABRIKAM)
          and claims.get("idp") == "https://sts.windows.net/%s/" % CONTOSO, str(claims))
    check("guest: client_info stays home uid/utid", client_info(body.get("client_info", "e30")) ==
          {"uid": ALICE_OID, "utid": CONTOSO})
    body, status, _ = sign_in(c, "fabrikam.example", FAM_A, "bob@contoso.example")
    check("guest: bob is no guest in fabrikam -> AADSTS50020", body.get("_query", {}).get("error") == "invalid_request"
          and "AADSTS50020" in body.get("_query", {}).get("error_description", ""), str(body))
    # a home-tenant refresh token works at the guest tenant (refresh tokens are not tenant-bound)
    home, _, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example")
    status, body, _ = refresh(c, FABRIKAM, FAM_A, home["refresh_token"])
    claims = jwt_parts(body["id_token"])[1] if status == 200 else {}
    check("guest: home refresh token redeemed at fabrikam", status == 200 and claims.get("tid") == FABRIKAM and
          client_info(body["client_info"]) == {"uid": ALICE_OID, "utid": CONTOSO})


def test_consumers(c):
    body, status, _ = sign_in(c, "consumers", CLIENT_C, "carol@outlook.example")
    claims = jwt_parts(body["id_token"])[1] if status == 200 else {}
    check("consumers: carol (MSA) signs in", status == 200 and claims.get("tid") == MSA and
          claims.get("iss") == "%s/%s/v2.0" % (c.base, MSA) and
          client_info(body["client_info"]) == {"uid": claims.get("oid"), "utid": MSA}, str(claims))
    check("consumers: MSA refresh token format", body.get("refresh_token", "").startswith("M.C"))
    body, status, _ = sign_in(c, "common", CLIENT_C, "carol@outlook.example")
    check("common: MSA user gets the consumers tenant", status == 200 and jwt_parts(body["id_token"])[1]["tid"] == MSA)
    body, status, _ = sign_in(c, "consumers", CLIENT_C, "alice@contoso.example")
    check("consumers: work account refused", body.get("_query", {}).get("error") == "invalid_request")
    body, status, _ = sign_in(c, "organizations", CLIENT_C, "alice@contoso.example")
    check("organizations: alice gets her home tenant", status == 200 and jwt_parts(body["id_token"])[1]["tid"] == CONTOSO)


def test_foci(c):
    body, status, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example", "https://graph.microsoft.com/User.Read " + MSAL_SCOPES)
    check("FOCI: fam-a gets foci 1", status == 200 and body.get("foci") == "1")
    frt = body["refresh_token"]
    status, b, _ = refresh(c, "contoso.example", FAM_B, frt, "https://graph.microsoft.com/Mail.Read " + MSAL_SCOPES)
    check("FOCI: fam-b redeems fam-a's family refresh token", status == 200 and b.get("foci") == "1" and
          b.get("refresh_token") and b["refresh_token"] != frt and b.get("scope", "").startswith("https://graph.microsoft.com/Mail.Read"),
          str(b)[:200])
    check("FOCI: fam-b's id_token aud is fam-b", jwt_parts(b["id_token"])[1].get("aud") == FAM_B)
    status, err, _ = refresh(c, "contoso.example", CLIENT_C, frt)
    check("FOCI: client c -> 400 invalid_grant, suberror client_mismatch", status == 400 and
          err.get("error") == "invalid_grant" and err.get("suberror") == "client_mismatch" and
          err.get("error_codes") == [70000] and err.get("error_additional_info") == ["client_mismatch"], str(err))
    body, _, _ = sign_in(c, "contoso.example", CLIENT_C, "alice@contoso.example")
    check("FOCI: non-family client gets no foci", "foci" not in body and body.get("refresh_token"))
    status, err, _ = refresh(c, "contoso.example", FAM_A, body["refresh_token"])
    check("FOCI: c's refresh token refused to fam-a (client_mismatch)", status == 400 and err.get("suberror") == "client_mismatch")
    status, ok, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"])
    check("FOCI: c redeems its own refresh token", status == 200 and "foci" not in ok)
    return frt


def test_rotation(c, frt):
    status, first_body, _ = refresh(c, "contoso.example", FAM_A, frt)
    status2, second, _ = refresh(c, "contoso.example", FAM_A, frt)
    check("rotation: a new refresh token each time, old one still valid (default)", status == 200 and status2 == 200 and
          first_body["refresh_token"] not in (frt, second["refresh_token"]))
    c.json("POST", "/test/config?old_refresh_token_valid=0")
    status, err, _ = refresh(c, "contoso.example", FAM_A, frt)
    check("rotation: old_refresh_token_valid=0 -> invalid_grant bad_token", status == 400 and
          err.get("error") == "invalid_grant" and err.get("suberror") == "bad_token", str(err)[:200])
    status, _, _ = refresh(c, "contoso.example", FAM_A, second["refresh_token"])
    check("rotation: the newest refresh token works", status == 200)
    c.json("POST", "/test/config?old_refresh_token_valid=1&refresh_in_seconds=1800")
    status, body, _ = refresh(c, "contoso.example", FAM_A, second["refresh_token"])
    check("config: refresh_in", body.get("refresh_in") == 1800)
    c.json("POST", "/test/config?refresh_in_seconds=0")
    status, err, _ = refresh(c, "contoso.example", FAM_A, "garbage")
    check("refresh: unknown refresh token -> invalid_grant", status == 400 and err.get("error") == "invalid_grant")
    _, revoked, _ = c.json("POST", "/test/revoke-refresh-tokens?username=bob@contoso.example")
    check("revoke-refresh-tokens answers a count", revoked.get("ok") is True and isinstance(revoked.get("revoked"), int))


def test_device(c):
    c.json("POST", "/test/config?device_flow_interval=1")
    status, dc, _ = c.json("POST", "/contoso.example/oauth2/v2.0/devicecode",
                           {"client_id": FAM_A, "scope": "https://graph.microsoft.com/.default " + MSAL_SCOPES})
    SECRETS.add(dc.get("device_code", "-"))
    check("device: devicecode answer", status == 200 and len(dc.get("user_code", "")) == 9 and dc.get("interval") == 1 and
          dc.get("verification_uri") == c.base + "/devicelogin" and dc.get("expires_in") == 900 and
          dc["user_code"] in dc.get("message", ""), str(dc))
    poll = {"grant_type": DEVICE_GRANT, "client_id": FAM_A, "device_code": dc["device_code"], "client_info": "1"}
    status, err, _ = c.json("POST", "/contoso.example/oauth2/v2.0/token", poll)
    check("device: authorization_pending", status == 400 and err.get("error") == "authorization_pending"
          and err.get("error_codes") == [70016])
    status, err, _ = c.json("POST", "/contoso.example/oauth2/v2.0/token", poll)
    check("device: polling too fast -> slow_down", err.get("error") == "slow_down")
    _, ok, _ = c.json("POST", "/test/approve-device?" + urllib.parse.urlencode(
        {"user_code": dc["user_code"].lower(), "username": "alice@contoso.example"}))
    check("device: approve-device", ok.get("ok") is True, str(ok))
    status, body, _ = c.json("POST", "/contoso.example/oauth2/v2.0/token", poll)
    SECRETS.update(body.get(k, "-") for k in ("access_token", "refresh_token", "id_token"))
    check("device: tokens after approval (.default expanded)", status == 200 and body.get("scope") ==
          "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.Read openid profile" and
          jwt_parts(body["id_token"])[1].get("oid") == ALICE_OID and body.get("foci") == "1", str(body)[:300])
    status, err, _ = c.json("POST", "/contoso.example/oauth2/v2.0/token", poll)
    check("device: code is single-use", status == 400 and err.get("error") == "invalid_grant")

    status, dc, _ = c.json("POST", "/common/oauth2/v2.0/devicecode", {"client_id": CLIENT_C, "scope": MSAL_SCOPES})
    c.json("POST", "/test/deny-device?user_code=" + dc["user_code"])
    poll = {"grant_type": DEVICE_GRANT, "client_id": CLIENT_C, "device_code": dc["device_code"]}
    status, err, _ = c.json("POST", "/common/oauth2/v2.0/token", poll)
    check("device: deny -> authorization_declined", status == 400 and err.get("error") == "authorization_declined")
    status, dc, _ = c.json("POST", "/common/oauth2/v2.0/devicecode", {"client_id": CLIENT_C, "scope": MSAL_SCOPES})
    c.json("POST", "/test/expire-device")
    poll["device_code"] = dc["device_code"]
    status, err, _ = c.json("POST", "/common/oauth2/v2.0/token", poll)
    check("device: expired -> expired_token", status == 400 and err.get("error") == "expired_token")
    status, dc, _ = c.json("POST", "/common/oauth2/v2.0/devicecode", {"client_id": CLIENT_C, "scope": MSAL_SCOPES})
    status, _, page = c.request("POST", "/devicelogin", {"otc": dc["user_code"], "username": "carol@outlook.example",
                                                        "password": "carol-password", "action": "approve"})
    poll["device_code"] = dc["device_code"]
    status2, body, _ = c.json("POST", "/common/oauth2/v2.0/token", poll)
    check("device: the /devicelogin page approves", status == 200 and status2 == 200 and
          jwt_parts(body["id_token"])[1].get("tid") == MSA, str(body)[:200])
    c.json("POST", "/test/config?device_flow_interval=5")


def test_b2c(c, jwk):
    status, doc, _ = c.json("GET", "/tfp/contosob2c.onmicrosoft.com/B2C_1_signin/v2.0/.well-known/openid-configuration")
    check("B2C: tfp discovery", status == 200 and doc.get("issuer") == "%s/tfp/%s/b2c_1_signin/v2.0/" % (c.base, B2C) and
          doc.get("token_endpoint") == c.base + "/tfp/contosob2c.onmicrosoft.com/b2c_1_signin/oauth2/v2.0/token", str(doc)[:300])
    status, doc, _ = c.json("GET", "/contosob2c.onmicrosoft.com/B2C_1_signin/v2.0/.well-known/openid-configuration")
    check("B2C: path discovery", status == 200 and doc.get("issuer") == "%s/%s/v2.0/" % (c.base, B2C))
    scope = "https://contosob2c.onmicrosoft.com/api/read openid offline_access"
    body, status, _ = sign_in(c, "contosob2c.onmicrosoft.com/B2C_1_signin", CLIENT_C, "dana@b2c.example", scope)
    claims = jwt_parts(body["id_token"])[1] if status == 200 else {}
    check("B2C: dana signs in", status == 200 and body.get("access_token"), str(body)[:300])
    info = client_info(body.get("client_info", "e30"))
    check("B2C: client_info uid carries the policy", info == {"uid": claims.get("oid", "?") + "-b2c_1_signin", "utid": B2C}, str(info))
    check("B2C: id_token tfp/acr, issuer, no preferred_username", claims.get("tfp") == "B2C_1_signin" and
          claims.get("acr") == "b2c_1_signin" and claims.get("iss") == "%s/%s/v2.0/" % (c.base, B2C) and
          "preferred_username" not in claims and claims.get("emails") == ["dana@b2c.example"], str(claims))
    body, status, _ = sign_in(c, "tfp/contosob2c.onmicrosoft.com/B2C_1_signin", CLIENT_C, "dana@b2c.example", "openid offline_access")
    check("B2C: openid-only sign-in gives no access token (as B2C)", status == 200 and "access_token" not in body
          and body.get("id_token") and body.get("refresh_token"), str(body)[:200])
    status, err, _ = refresh(c, "contosob2c.onmicrosoft.com/B2C_1_signup_signin", CLIENT_C, body["refresh_token"], "openid offline_access")
    check("B2C: refresh token is bound to its policy", status == 400 and err.get("error") == "invalid_grant")
    body, status, _ = sign_in(c, "contosob2c.onmicrosoft.com/B2C_1_signin", CLIENT_C, "alice@contoso.example", scope)
    check("B2C: a work account is not a B2C user", body.get("_query", {}).get("error") == "invalid_request")


def test_adfs(c):
    status, doc, _ = c.json("GET", "/adfs/.well-known/openid-configuration")
    check("ADFS: discovery", status == 200 and doc.get("issuer") == c.base + "/adfs" and
          doc.get("token_endpoint") == c.base + "/adfs/oauth2/token/", str(doc)[:200])
    verifier, challenge = pkce()
    params = {"client_id": FAM_A, "response_type": "code", "redirect_uri": REDIRECT, "scope": "openid profile offline_access",
              "state": "s1", "nonce": "n1", "code_challenge": challenge, "code_challenge_method": "S256",
              "test_user": "frank@corp.example"}
    status, headers, _ = c.request("GET", "/adfs/oauth2/authorize/?" + urllib.parse.urlencode(params))
    query = location_params(headers)[1]
    SECRETS.add(query.get("code", "-"))
    status, body, _ = c.json("POST", "/adfs/oauth2/token/", {
        "grant_type": "authorization_code", "client_id": FAM_A, "code": query.get("code", ""), "redirect_uri": REDIRECT,
        "code_verifier": verifier, "client_info": "1"})
    SECRETS.update(body.get(k, "-") for k in ("access_token", "refresh_token", "id_token"))
    claims = jwt_parts(body["id_token"])[1] if status == 200 else {}
    check("ADFS: sign-in, no client_info, no foci", status == 200 and "client_info" not in body and "foci" not in body
          and body.get("token_type") == "bearer", str(body)[:200])
    check("ADFS: id_token upn and sub, no tid", claims.get("upn") == "frank@corp.example" and claims.get("sub") and
          "tid" not in claims and claims.get("iss") == c.base + "/adfs" and claims.get("nonce") == "n1", str(claims))
    status, b, _ = c.json("POST", "/adfs/oauth2/token", {"grant_type": "refresh_token", "client_id": FAM_A,
                                                         "refresh_token": body.get("refresh_token", "")})
    SECRETS.add(b.get("refresh_token", "-"))
    check("ADFS: refresh", status == 200 and b.get("access_token"))


def test_default_scopes(c):
    body, status, _ = sign_in(c, "contoso.example", CLIENT_C, "bob@contoso.example",
                              "https://graph.microsoft.com/.default " + MSAL_SCOPES)
    check("/.default: Graph expands to the static list", body.get("scope") ==
          "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.Read openid profile", body.get("scope"))
    check("/.default: scp in the access token", jwt_parts(body["access_token"])[1].get("scp") == "User.Read Mail.Read")
    status, b, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"],
                           "https://management.core.windows.net//.default " + MSAL_SCOPES)
    check("/.default: ARM double slash", status == 200 and b.get("scope") ==
          "https://management.core.windows.net//user_impersonation openid profile", b.get("scope"))
    check("/.default: ARM audience keeps its slash", jwt_parts(b["access_token"])[1].get("aud") == "https://management.core.windows.net/")
    status, b, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"], "User.Read Mail.Read openid")
    check("short Graph scope names", b.get("scope") == "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.Read openid")
    status, err, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"],
                             "https://graph.microsoft.com/User.Read https://management.core.windows.net//user_impersonation")
    check("two resources -> invalid_scope AADSTS28000", status == 400 and err.get("error_codes") == [28000])
    status, err, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"], "https://graph.microsoft.com/Nope.Read")
    check("unknown permission -> invalid_scope AADSTS70011", status == 400 and err.get("error") == "invalid_scope")
    c.json("POST", "/test/decline-scope?scope=https://graph.microsoft.com/Mail.Read")
    status, b, _ = refresh(c, "contoso.example", CLIENT_C, body["refresh_token"], "User.Read Mail.Read openid")
    check("decline-scope leaves the scope out", b.get("scope") == "https://graph.microsoft.com/User.Read openid", b.get("scope"))
    return body["refresh_token"]


def test_fail_next(c, rt):
    claims = '{"access_token":{"capolids":{"essential":true,"values":["c1"]}}}'
    c.json("POST", "/test/fail-next?" + urllib.parse.urlencode({
        "error": "invalid_grant", "suberror": "bad_token", "error_codes": "70008", "count": "1",
        "grant_type": "refresh_token", "client_id": CLIENT_C}))
    c.json("POST", "/test/fail-next?" + urllib.parse.urlencode({
        "error": "interaction_required", "error_codes": "50076,50079", "claims": claims, "grant_type": "refresh_token"}))
    status, err, headers = refresh(c, "contoso.example", FAM_A, "anything")  # does not match the client_id filter
    check("fail-next: client_id filter skips other clients; second rule applies", status == 400 and
          err.get("error") == "interaction_required" and err.get("error_codes") == [50076, 50079] and
          err.get("claims") == claims and "suberror" not in err, str(err)[:300])
    status, err, headers = c.json("POST", "/contoso.example/oauth2/v2.0/token", {
        "grant_type": "refresh_token", "client_id": CLIENT_C, "refresh_token": rt, "scope": MSAL_SCOPES},
        {"client-request-id": "0f0f0f0f-1111-2222-3333-444444444444"})
    check("fail-next: exact Entra error JSON keys", status == 400 and set(err) == {
        "error", "error_description", "error_codes", "timestamp", "trace_id", "correlation_id", "error_uri", "suberror"}, str(err))
    description = err.get("error_description", "")
    check("fail-next: error_description format", description.startswith("AADSTS70008: The provided authorization code or refresh token has expired")
          and ("Trace ID: %s Correlation ID: %s Timestamp: %s" % (err.get("trace_id"), err.get("correlation_id"),
                                                                  err.get("timestamp"))) in description, description)
    check("fail-next: values", err.get("error") == "invalid_grant" and err.get("suberror") == "bad_token" and
          err.get("error_codes") == [70008] and err.get("correlation_id") == "0f0f0f0f-1111-2222-3333-444444444444" and
          headers.get("client-request-id") == "0f0f0f0f-1111-2222-3333-444444444444" and
          len(err.get("timestamp", "")) == 20 and err["timestamp"].endswith("Z"), str(err))
    status, ok, _ = refresh(c, "contoso.example", CLIENT_C, rt)
    check("fail-next: count consumed; the refresh token was not", status == 200)
    c.json("POST", "/test/fail-next?error=interaction_required&error_codes=50076&claims=" + urllib.parse.quote(claims))
    refresh(c, "contoso.example", FAM_A, rt, claims='{"access_token":{"xms_cc":{"values":["cp1"]}}}')
    _, log, _ = c.json("GET", "/test/requests?endpoint=token&limit=1")
    last = log["recent"][-1]
    check("fail-next: the request's claims are recorded even when a failure is injected", last["injected"] is True and
          last["claims"] == {"access_token": {"xms_cc": {"values": ["cp1"]}}} and last["error"] == "interaction_required", str(last))
    status, err, _ = refresh(c, "contoso.example", CLIENT_C, rt, claims="{not json")
    check("claims that are not JSON -> invalid_request", status == 400 and err.get("error") == "invalid_request")
    c.json("POST", "/test/fail-next?status=503&retry_after=7&count=2")
    status, err, headers = refresh(c, "contoso.example", CLIENT_C, rt)
    check("fail-next: 503 temporarily_unavailable with Retry-After", status == 503 and
          err.get("error") == "temporarily_unavailable" and headers.get("retry-after") == "7")
    c.json("POST", "/test/reset")
    status, _, _ = refresh(c, "contoso.example", CLIENT_C, rt)
    check("reset clears pending faults", status == 200)
    c.json("POST", "/test/fail-next?endpoint=authorize&error=interaction_required&error_codes=50076")
    _, challenge = pkce()
    url, _ = authorize_url("contoso.example", CLIENT_C, challenge)
    status, headers, _ = c.request("GET", url + "&test_user=bob%40contoso.example")
    check("fail-next endpoint=authorize -> redirect with the error",
          location_params(headers)[1].get("error") == "interaction_required")
    c.json("POST", "/test/delay?ms=300&count=1")
    started = time.time()
    refresh(c, "contoso.example", CLIENT_C, rt)
    check("delay: the next token request waits", time.time() - started >= 0.3)


def test_controls(c):
    c.json("POST", "/test/decline-next-signin")
    _, challenge = pkce()
    url, params = authorize_url("contoso.example", FAM_A, challenge)
    status, headers, _ = c.request("GET", url + "&test_user=alice%40contoso.example")
    query = location_params(headers)[1]
    check("decline-next-signin -> error=access_denied", status == 302 and query.get("error") == "access_denied" and
          query.get("state") == params["state"], str(query))
    c.json("POST", "/test/next-signin?username=bob@contoso.example")
    fresh = Client(c.base)
    body, status, _ = sign_in(fresh, "contoso.example", FAM_A)
    check("next-signin: GET authorize signs in as the chosen user", status == 200 and
          jwt_parts(body["id_token"])[1].get("preferred_username") == "bob@contoso.example", str(body)[:200])
    c.json("POST", "/test/resource?resource=api://brokerd-extra&permissions=One.Read,Two.Write&default=One.Read")
    body, status, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example", "api://brokerd-extra/.default openid")
    check("resource control: a new resource and its /.default", status == 200 and
          body.get("scope") == "api://brokerd-extra/One.Read openid", str(body.get("scope")))
    status, cfg, _ = c.json("GET", "/test/config")
    check("config readable", status == 200 and cfg.get("access_token_expire_seconds") == 3599)
    _, directory, _ = c.json("GET", "/test/directory")
    check("directory lists users/tenants/clients", len(directory.get("users", [])) == 5 and len(directory.get("clients", [])) == 3)


def test_claims_and_log(c, rt):
    c.json("POST", "/test/reset-requests")
    claims = {"access_token": {"xms_cc": {"values": ["cp1"]}, "acrs": {"essential": True, "value": "c1"}}}
    status, body, _ = refresh(c, "contoso.example", CLIENT_C, rt, claims=json.dumps(claims))
    check("claims: token request with claims succeeds, xms_cc in the access token", status == 200 and
          jwt_parts(body["access_token"])[1].get("xms_cc") == ["cp1"])
    refresh(c, "contoso.example", CLIENT_C, rt)
    status, log, _ = c.json("GET", "/test/requests?endpoint=token")
    recent = log.get("recent", [])
    check("request log: claims recorded", len(recent) == 2 and recent[0]["has_claims"] is True and
          recent[0]["claims"] == claims and recent[1]["has_claims"] is False and recent[1]["claims"] is None, str(recent)[:400])
    check("request log: fields", set(recent[0]) >= {"seq", "path", "tenant", "grant_type", "client_id", "scope",
                                                    "has_claims", "claims", "status", "error", "suberror"} and
          recent[0]["tenant"] == "contoso.example" and recent[0]["grant_type"] == "refresh_token" and
          recent[0]["client_id"] == CLIENT_C and recent[0]["status"] == 200 and recent[0]["rt_client_id"] == CLIENT_C)
    check("request log: counts by grant type and by client", log.get("total") == 2 and
          log.get("by_grant_type") == {"refresh_token": 2} and log.get("by_client") == {CLIENT_C: 2})
    body, _, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example")
    refresh(c, "contoso.example", CLIENT_C, body["refresh_token"])
    _, log, _ = c.json("GET", "/test/requests?endpoint=token&limit=2")
    last = log["recent"][-1]
    check("request log: a failure with error, suberror, the refresh token's client", last["status"] == 400 and
          last["error"] == "invalid_grant" and last["suberror"] == "client_mismatch" and last["rt_client_id"] == FAM_A
          and last["user"] == "alice@contoso.example", str(last))
    check("request log: counts", log.get("total") == 4 and log.get("by_grant_type") == {"refresh_token": 3,
          "authorization_code": 1} and log.get("by_client") == {CLIENT_C: 3, FAM_A: 1} and
          log.get("by_status") == {"200": 3, "400": 1}, str({k: log.get(k) for k in ("total", "by_grant_type", "by_client", "by_status")}))
    _, root, _ = c.json("GET", "/")
    print("     RS256 backend: %s" % root.get("rs256"))


def test_log_has_no_secrets(c):
    status, headers, data = c.request("GET", "/test/requests?limit=100000")
    text = data.decode()
    leaked = [s for s in SECRETS if s and s != "-" and s in text]
    check("request log: no token, code or device code (%d checked)" % len(SECRETS), status == 200 and not leaked and
          len(SECRETS) > 20, "%d leaked" % len(leaked))


def test_concurrency(ready):
    body, _, _ = sign_in(Client(ready["http"]), "contoso.example", FAM_A, "alice@contoso.example")
    control = Client(ready["http"])
    control.json("POST", "/test/config?old_refresh_token_valid=0")
    results = []

    def worker():
        c = Client(ready["http"])
        results.append(refresh(c, "contoso.example", FAM_A, body["refresh_token"])[0])

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("concurrency: 20 parallel uses of one refresh token, rotation strict -> exactly one 200",
          sorted(results) == [200] + [400] * 19, str(sorted(results)))
    control.json("POST", "/test/config?old_refresh_token_valid=1&refresh_token_expire_seconds=1")
    body, _, _ = sign_in(control, "contoso.example", FAM_A, "alice@contoso.example")
    time.sleep(1.1)
    status, err, _ = refresh(control, "contoso.example", FAM_A, body["refresh_token"])
    check("refresh_token_expire_seconds: an idle refresh token expires (AADSTS700082)", status == 400 and
          err.get("error_codes") == [700082], str(err)[:200])
    control.json("POST", "/test/config?refresh_token_expire_seconds=0")
    started = time.time()
    errors = []

    def hammer():
        c = Client(ready["http"])
        for _ in range(25):
            if c.request("GET", "/organizations/v2.0/.well-known/openid-configuration")[0] != 200:
                errors.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("concurrency: 8 connections x 25 requests in %.2f s" % (time.time() - started), not errors)


def test_https(ready):
    c = Client(ready["https"], ready["ca"])
    status, doc, _ = c.json("GET", "/contoso.example/v2.0/.well-known/openid-configuration")
    check("https: discovery verified with the generated CA; issuer uses https base", status == 200 and
          doc.get("issuer") == "%s/%s/v2.0" % (ready["https"], CONTOSO))
    body, status, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example")
    check("https: code flow", status == 200 and jwt_parts(body["id_token"])[1]["iss"].startswith("https://"))
    try:
        bad = http.client.HTTPSConnection(ready["https"][len("https://"):], timeout=5, context=ssl.create_default_context())
        bad.request("GET", "/common/v2.0/.well-known/openid-configuration")
        bad.getresponse()
        check("https: untrusted without the CA", False)
    except ssl.SSLError:
        check("https: untrusted without the CA", True)
    port = int(ready["https"].rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=ready["ca"])
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="login.microsoftonline.com") as tls:
        tls.sendall(b"GET /common/v2.0/.well-known/openid-configuration HTTP/1.1\r\nHost: login.microsoftonline.com\r\n"
                    b"Connection: close\r\n\r\n")
        raw = b""
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                break
            raw += chunk
    doc = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    check("https: --san login.microsoftonline.com; URLs follow the Host header",
          doc.get("token_endpoint") == "https://login.microsoftonline.com/common/oauth2/v2.0/token", str(doc)[:200])
    localhost = Client(ready["https"].replace("127.0.0.1", "localhost"), ready["ca"])
    status, _, _ = localhost.json("GET", "/common/v2.0/.well-known/openid-configuration")
    check("https: certificate valid for localhost too", status == 200)


def test_keepalive_speed(c):
    before = c.connects
    started = time.time()
    for _ in range(200):
        c.request("GET", "/common/v2.0/.well-known/openid-configuration")
    elapsed = time.time() - started
    check("keep-alive: 200 requests on one connection", c.connects == before)
    check("fast: 200 discovery requests in %.2f s" % elapsed, elapsed < 5)
    started = time.time()
    body, _, _ = sign_in(c, "contoso.example", FAM_A, "alice@contoso.example")
    for _ in range(50):
        refresh(c, "contoso.example", FAM_A, body["refresh_token"])
    elapsed = time.time() - started
    check("fast: 50 refreshes in %.2f s" % elapsed, elapsed < 5)


def test_fake_browser(c):
    """Tests/idp/fake_browser.py works unchanged once /test/next-signin is set (GET authorize 302s to the loopback)."""
    browser = os.path.join(os.path.dirname(HERE), "idp", "fake_browser.py")
    if not os.path.exists(browser):
        print("     (Tests/idp/fake_browser.py not present: skipped)")
        return
    got = {}

    class Loopback(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            got.update(urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Loopback)
    threading.Thread(target=server.handle_request, daemon=True).start()
    c.json("POST", "/test/next-signin?username=alice@contoso.example")
    _, challenge = pkce()
    url, params = authorize_url("contoso.example", FAM_A, challenge,
                                redirect_uri="http://127.0.0.1:%d/" % server.server_address[1])
    result = subprocess.run([sys.executable, browser, c.base + url], capture_output=True, timeout=30)
    server.server_close()
    check("Tests/idp/fake_browser.py + next-signin delivers the code", result.returncode == 0 and
          got.get("state") == [params["state"]] and got.get("code"), str(result.stderr)[:200])
    SECRETS.update(got.get("code", []))


def main():
    keep = "--keep" in sys.argv
    state_dir = tempfile.mkdtemp(prefix="entra-selftest-")
    started = time.time()
    process, ready = start_server(state_dir)
    elapsed = time.time() - started
    try:
        c = Client(ready["http"])
        for test in (lambda: test_startup(ready, state_dir, elapsed), lambda: test_discovery(c),
                     lambda: test_instance_discovery(c)):
            test()
        jwk = test_keys(c)
        steps = [lambda: test_code_flow(c, jwk), lambda: test_guest(c), lambda: test_consumers(c)]
        for step in steps:
            step()
        frt = test_foci(c)
        test_rotation(c, frt)
        test_device(c)
        test_b2c(c, jwk)
        test_adfs(c)
        rt = test_default_scopes(c)
        c.json("POST", "/test/reset")
        test_fail_next(c, rt)
        c.json("POST", "/test/reset")
        test_controls(c)
        test_claims_and_log(c, rt)
        test_concurrency(ready)
        test_https(ready)
        test_fake_browser(c)
        test_keepalive_speed(c)
        test_log_has_no_secrets(c)
    except Exception:
        import traceback
        traceback.print_exc()
        check("selftest ran to the end", False)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            out, _ = process.communicate(timeout=10)
            check("SIGTERM: clean exit 0, ENTRA STOPPED, ready.json removed", process.returncode == 0 and
                  "ENTRA STOPPED" in out and not os.path.exists(os.path.join(state_dir, "ready.json")),
                  "rc=%s %s" % (process.returncode, out[-500:]))
        except subprocess.TimeoutExpired:
            process.kill()
            check("SIGTERM: clean exit", False, "did not exit within 10 s")
        if not keep:
            shutil.rmtree(state_dir, ignore_errors=True)
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
