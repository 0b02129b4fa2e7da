"""Protocol side of the Entra ID test emulator: discovery, authorize, token, device code, keys, userinfo.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.
"""

import hashlib
import html
import json
import secrets
import threading
import time
import urllib.parse

from entra_control import (DEVICE_GRANT, ControlMixin, first, html_response, json_response, page, redirect)
from entra_crypto import b64url
from entra_tokens import TokenMixin
from entra_directory import (CLIENTS, INSTANCE_METADATA, KNOWN_INSTANCES, USERS, Authority, ScopeError,
                             aad_authority, b2c_policy, find_tenant, message, parse_scopes, resolve_signin)

SESSION_COOKIE = "ESTSAUTH"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


class Emulator(ControlMixin, TokenMixin):
    def __init__(self, signing_key):
        self.key = signing_key
        self.lock = threading.RLock()
        self.codes, self.rts, self.devices, self.ats, self.sessions = {}, {}, {}, {}, {}
        self.init_control()

    # --- routing -----------------------------------------------------------------------------------------------

    def handle(self, req):
        parts = [urllib.parse.unquote(p) for p in req.path.strip("/").split("/") if p]
        if not parts:
            return json_response(200, {"service": "Entra ID test emulator (brokerd tests); not Microsoft code",
                                       "see": "/test/directory", "rs256": self.key.backend})
        head = parts[0].lower()
        if head == "test":
            return self.control(req, "/".join(parts[1:]))
        if head == "oidc" and parts[1:] == ["userinfo"]:
            return self.logged(req, "userinfo", None, None, lambda: self.userinfo(req))
        if head == "devicelogin":
            return self.logged(req, "devicelogin", None, None, lambda: self.devicelogin(req))
        if head == "error":
            return html_response(200, page("Error", "<p>%s</p>" % html.escape(message(int(req.query.get("code", ["0"])[0] or 0)))))
        if head == "adfs":
            return self.route(req, Authority("adfs", "adfs"), [p.lower() for p in parts[1:]])
        if head == "tfp" and len(parts) >= 3:
            tenant = find_tenant(parts[1])
            policy = b2c_policy(tenant, parts[2]) if tenant is not None and tenant.kind == "b2c" else None
            if policy is None:
                return self.unknown_tenant(req, parts[1])
            return self.route(req, Authority("b2c", parts[1], tenant, "", policy, True), [p.lower() for p in parts[3:]])
        if len(parts) >= 2 and parts[1].lower() == "discovery" and parts[2:3] == ["instance"]:
            return self.logged(req, "instance_discovery", parts[0], None, lambda: self.instance_discovery(req))
        authority = aad_authority(parts[0])
        if authority is None:
            return self.logged(req, "unknown", parts[0], None, lambda: self.unknown_tenant(req, parts[0]))
        rest = [p.lower() for p in parts[1:]]
        if authority.kind == "b2c":
            policy = b2c_policy(authority.tenant, parts[1]) if len(parts) > 1 else None
            if policy is None and req.query.get("p"):
                policy, rest = b2c_policy(authority.tenant, first(req.query["p"])), rest
            elif policy is not None:
                rest = rest[1:]
            if policy is None:
                return json_response(400, self.error_body(
                    req, "invalid_request", 90002, description="AADB2C90011: A policy is required: /%s/{policy}/…" % parts[0]))
            authority.policy = policy
        return self.route(req, authority, rest)

    def route(self, req, auth, rest):
        path = "/".join(rest)
        table = {
            "v2.0/.well-known/openid-configuration": ("discovery", self.discovery),
            ".well-known/openid-configuration": ("discovery", self.discovery),
            "oauth2/v2.0/authorize": ("authorize", self.authorize),
            "oauth2/authorize": ("authorize", self.authorize),
            "oauth2/v2.0/token": ("token", self.token),
            "oauth2/token": ("token", self.token),
            "oauth2/v2.0/devicecode": ("devicecode", self.devicecode),
            "oauth2/devicecode": ("devicecode", self.devicecode),
            "oauth2/v2.0/logout": ("logout", self.logout),
            "oauth2/logout": ("logout", self.logout),
            "discovery/v2.0/keys": ("keys", self.keys),
            "discovery/keys": ("keys", self.keys),
            "userinfo": ("userinfo", lambda r, a: self.userinfo(r)),
        }
        if auth.kind != "adfs" and path in (".well-known/openid-configuration", "oauth2/authorize", "oauth2/token",
                                            "oauth2/devicecode", "userinfo"):
            path = ""  # v1 endpoints are not emulated for Entra / B2C
        if auth.kind == "adfs" and path == "v2.0/.well-known/openid-configuration":
            path = ""
        if path not in table:
            return json_response(404, {"error": "not_found", "path": req.path})
        endpoint, handler = table[path]
        return self.logged(req, endpoint, auth.segment, auth.policy, lambda: handler(req, auth))

    def logged(self, req, endpoint, tenant, policy, action):
        entry = self.start_entry(req, endpoint, tenant, policy)
        delay = self.take_delay(endpoint)
        if delay:
            entry["delay_ms"] = delay
            time.sleep(delay / 1000.0)
        response = action()
        self.finish_entry(entry, response.status)
        return response

    def unknown_tenant(self, req, segment):
        return self.error(req, 400, "invalid_tenant", 90002, segment)

    # --- discovery ------------------------------------------------------------------------------------------------

    def discovery(self, req, auth):
        base, prefix, issuer = req.base, auth.prefix(req.base), auth.issuer(req.base)
        if auth.kind == "adfs":
            doc = {"issuer": issuer, "authorization_endpoint": prefix + "/oauth2/authorize/",
                   "token_endpoint": prefix + "/oauth2/token/", "jwks_uri": prefix + "/discovery/keys",
                   "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic",
                                                             "private_key_jwt", "windows_client_authentication"],
                   "response_types_supported": ["code", "id_token", "code id_token", "id_token token", "code token",
                                                "code id_token token"],
                   "response_modes_supported": ["query", "fragment", "form_post"],
                   "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials",
                                             "urn:ietf:params:oauth:grant-type:jwt-bearer", "implicit", "password",
                                             "srv_challenge", DEVICE_GRANT, "device_code"],
                   "subject_types_supported": ["pairwise"],
                   "scopes_supported": ["openid", "profile", "email", "offline_access", "allatclaims", "aza",
                                        "user_impersonation", "vpn_cert", "winhello_cert", "logon_cert"],
                   "id_token_signing_alg_values_supported": ["RS256"],
                   "token_endpoint_auth_signing_alg_values_supported": ["RS256"],
                   "access_token_issuer": "http://%s/adfs/services/trust" % req.host,
                   "claims_supported": ["aud", "iss", "iat", "exp", "auth_time", "nonce", "at_hash", "c_hash", "sub",
                                        "upn", "unique_name", "pwd_url", "pwd_exp", "mfa_auth_time", "sid", "nbf"],
                   "microsoft_multi_refresh_token": True, "userinfo_endpoint": prefix + "/userinfo",
                   "capabilities": [], "end_session_endpoint": prefix + "/oauth2/logout",
                   "as_access_token_token_binding_supported": True, "as_refresh_token_token_binding_supported": True,
                   "resource_access_token_token_binding_supported": True, "op_id_token_token_binding_supported": True,
                   "rp_id_token_token_binding_supported": True, "frontchannel_logout_supported": True,
                   "frontchannel_logout_session_supported": True,
                   "device_authorization_endpoint": prefix + "/oauth2/devicecode",
                   "code_challenge_methods_supported": ["plain", "S256"]}
        elif auth.kind == "b2c":
            doc = {"issuer": issuer, "authorization_endpoint": prefix + "/oauth2/v2.0/authorize",
                   "token_endpoint": prefix + "/oauth2/v2.0/token", "end_session_endpoint": prefix + "/oauth2/v2.0/logout",
                   "jwks_uri": prefix + "/discovery/v2.0/keys", "response_modes_supported": ["query", "fragment", "form_post"],
                   "response_types_supported": ["code", "code id_token", "code token", "code id_token token", "id_token",
                                                "id_token token", "token", "token id_token"],
                   "scopes_supported": ["openid"], "subject_types_supported": ["pairwise"],
                   "id_token_signing_alg_values_supported": ["RS256"],
                   "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
                   "claims_supported": ["name", "given_name", "family_name", "emails", "oid", "sub", "tfp", "iss",
                                        "iat", "exp", "aud", "acr", "nonce", "auth_time"]}
        else:
            doc = {"token_endpoint": prefix + "/oauth2/v2.0/token",
                   "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
                   "jwks_uri": prefix + "/discovery/v2.0/keys",
                   "response_modes_supported": ["query", "fragment", "form_post"],
                   "subject_types_supported": ["pairwise"], "id_token_signing_alg_values_supported": ["RS256"],
                   "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                   "scopes_supported": ["openid", "profile", "email", "offline_access"],
                   "issuer": issuer, "request_uri_parameter_supported": False,
                   # Entra names https://graph.microsoft.com/oidc/userinfo; the emulator serves its own.
                   "userinfo_endpoint": base + "/oidc/userinfo",
                   "authorization_endpoint": prefix + "/oauth2/v2.0/authorize",
                   "device_authorization_endpoint": prefix + "/oauth2/v2.0/devicecode",
                   "http_logout_supported": True, "frontchannel_logout_supported": True,
                   "end_session_endpoint": prefix + "/oauth2/v2.0/logout",
                   "claims_supported": ["sub", "iss", "cloud_instance_name", "cloud_instance_host_name",
                                        "cloud_graph_host_name", "msgraph_host", "aud", "exp", "iat", "auth_time",
                                        "acr", "nonce", "preferred_username", "name", "tid", "ver", "at_hash",
                                        "c_hash", "email"],
                   "kerberos_endpoint": prefix + "/kerberos",
                   "tenant_region_scope": auth.tenant.region if auth.tenant is not None else None,
                   "cloud_instance_name": "microsoftonline.com", "cloud_graph_host_name": "graph.windows.net",
                   "msgraph_host": "graph.microsoft.com", "rbac_url": "https://pas.windows.net"}
        return json_response(200, doc)

    def instance_discovery(self, req):
        endpoint = first(req.query.get("authorization_endpoint", [""]))
        parsed = urllib.parse.urlparse(endpoint)
        host = (parsed.hostname or "").lower()
        if endpoint and host not in KNOWN_INSTANCES and parsed.netloc.lower() != req.host.lower() \
                and host not in LOOPBACK_HOSTS:
            return self.error(req, 400, "invalid_instance", 50049,
                              "The authority '%s' is not in the list of known authorities." % endpoint)
        tenant = next((p for p in parsed.path.split("/") if p), "common") if endpoint else "common"
        return json_response(200, {
            "tenant_discovery_endpoint": "%s/%s/v2.0/.well-known/openid-configuration" % (req.base, tenant),
            "api-version": first(req.query.get("api-version", ["1.1"])), "metadata": INSTANCE_METADATA})

    def keys(self, req, auth):
        issuer = auth.issuer(req.base) if auth.kind == "aad" else None
        return json_response(200, {"keys": [self.key.jwk(issuer)]})

    # --- authorize ----------------------------------------------------------------------------------------------

    def authorize(self, req, auth):
        p = {k: first(v) for k, v in req.query.items()}
        if req.method == "POST":
            p.update({k: first(v) for k, v in req.form.items()})
        e = req.entry
        e.update(client_id=p.get("client_id"), scope=p.get("scope"), prompt=p.get("prompt"),
                 login_hint=p.get("login_hint"))
        client = CLIENTS.get(p.get("client_id", ""))
        if client is None:
            e["error"] = "unauthorized_client"
            return html_response(400, page("Sign in", "<p>%s</p>" % html.escape(
                message(700016, p.get("client_id", "")))))
        redirect_uri = p.get("redirect_uri", "")
        target = urllib.parse.urlparse(redirect_uri)
        if target.scheme != "http" or target.hostname not in LOOPBACK_HOSTS:
            e["error"] = "invalid_request"
            return html_response(400, page("Sign in", "<p>%s</p>" % html.escape(
                message(50011, "The redirect URI '%s' does not match." % redirect_uri))))
        mode = p.get("response_mode", "query")

        def fail(error, code, detail="", extra=None):
            e["error"] = error
            fields = {"error": error, "error_description": message(code, detail)}
            fields.update(extra or {})
            return self.finish_authorize(redirect_uri, mode, fields, p.get("state"))

        rule = self.take_fault("authorize", None, client.id)
        if rule is not None:
            e["injected"] = True
            return fail(rule["error"], rule["error_codes"][0], "", {"suberror": rule["suberror"]} if rule["suberror"] else None)
        if p.get("response_type") != "code":
            return fail("unsupported_response_type", 700054, "response_type '%s'." % p.get("response_type"))
        if not p.get("code_challenge"):
            return fail("invalid_request", 9002325)
        if p.get("code_challenge_method") != "S256":
            return fail("invalid_request", 9002325, "code_challenge_method must be S256.")
        claims, bad_claims = self.record_claims(e, p.get("claims"))
        if bad_claims:
            return fail("invalid_request", 90015)
        try:
            scopes = parse_scopes(p.get("scope", ""), auth.kind, client.id)
        except ScopeError as error:
            return fail(error.error, error.code, error.detail)

        username, via_form, sticky_session = None, False, None
        if req.method == "POST" and p.get("action") == "decline":
            return fail("access_denied", 65004, "", {"error_subcode": "cancel"})
        nxt = self.take_next_signin()
        if nxt == "decline":
            return fail("access_denied", 65004, "", {"error_subcode": "cancel"})
        if p.get("test_user"):
            username = p["test_user"].lower()
        elif req.method == "POST" and p.get("username"):
            username, via_form = p["username"].strip().lower(), True
            user = USERS.get(username)
            if user is None:
                return self.login_form(req, p, message(50034, "User '%s'." % username))
            if p.get("password") != user.password:
                return self.login_form(req, p, message(50126))
        elif nxt:
            username = nxt
        else:
            session_user = self.sessions.get(req.cookies.get(SESSION_COOKIE, ""))
            hint = (p.get("login_hint") or "").lower()
            if session_user and p.get("prompt") not in ("login", "select_account") and (not hint or hint == session_user):
                username, sticky_session = session_user, True
            elif p.get("prompt") == "none":
                return fail("login_required", 50058)
            else:
                return self.login_form(req, p, "")
        user = USERS.get(username)
        if user is None:
            return fail("invalid_request", 50034, "User '%s'." % username)
        tenant_id, oid = resolve_signin(user, auth)
        if tenant_id is None:
            if via_form:
                return self.login_form(req, p, message(oid, "User '%s'." % username))
            return fail("invalid_request", oid, "User '%s'." % username)
        e["user"] = user.username
        code = ("0.A" if auth.kind != "adfs" else "") + b64url(secrets.token_bytes(96))
        with self.lock:
            self.codes[code] = {"client_id": client.id, "redirect_uri": redirect_uri, "challenge": p["code_challenge"],
                                "username": user.username, "tenant_id": tenant_id, "oid": oid, "kind": auth.kind,
                                "authority": auth, "scope": p.get("scope", ""), "nonce": p.get("nonce"),
                                "claims": claims, "issued": time.time(), "used": False}
        headers = []
        if not sticky_session:
            session = secrets.token_urlsafe(24)
            with self.lock:
                self.sessions[session] = user.username
            headers.append(("Set-Cookie", "%s=%s; Path=/; HttpOnly" % (SESSION_COOKIE, session)))
        fields = {"code": code}
        if auth.kind != "adfs" and p.get("client_info") == "1":
            fields["client_info"] = self.client_info(user, auth)
        return self.finish_authorize(redirect_uri, mode, fields, p.get("state"), headers)

    @staticmethod
    def finish_authorize(redirect_uri, mode, fields, state, headers=None):
        fields = dict(fields)
        if state is not None:
            fields["state"] = state
        if mode == "form_post":
            inputs = "".join('<input type="hidden" name="%s" value="%s">' % (html.escape(k), html.escape(v))
                             for k, v in fields.items())
            return html_response(200, '<!DOCTYPE html><html><body onload="document.forms[0].submit()">'
                                      '<form method="post" action="%s">%s<noscript><button>Continue</button></noscript>'
                                      '</form></body></html>' % (html.escape(redirect_uri), inputs), headers)
        query = urllib.parse.urlencode(fields)
        if mode == "fragment":
            return redirect(redirect_uri.split("#")[0] + "#" + query, headers)
        return redirect(redirect_uri + ("&" if "?" in redirect_uri else "?") + query, headers)

    def login_form(self, req, p, error_text):
        action = req.path + ("?" + req.raw_query if req.raw_query else "")
        hint = p.get("username") or p.get("login_hint") or ""
        body = ('%s<form method="post" action="%s">'
                '<label>Email or phone <input name="username" value="%s" autocomplete="username"></label>'
                '<label>Password <input type="password" name="password" autocomplete="current-password"></label>'
                '<button type="submit" name="action" value="signin">Sign in</button>'
                '<button type="submit" name="action" value="decline">Cancel</button></form>') % (
            '<p id="error">%s</p>' % html.escape(error_text) if error_text else "", html.escape(action), html.escape(hint))
        return html_response(200, page("Sign in to your account", body),
                             [("Cache-Control", "no-store, no-cache"), ("X-Frame-Options", "DENY")])

    def logout(self, req, auth):
        cookie = req.cookies.get(SESSION_COOKIE)
        with self.lock:
            self.sessions.pop(cookie, None)
        headers = [("Set-Cookie", "%s=; Path=/; Max-Age=0" % SESSION_COOKIE)]
        target = first(req.query.get("post_logout_redirect_uri", [""]))
        if target:
            return redirect(target, headers)
        return html_response(200, page("You signed out of your account", ""), headers)

    # --- identity pieces ------------------------------------------------------------------------------------------

    @staticmethod
    def client_info(user, auth):
        if auth.kind == "adfs":
            return None
        uid = "%s-%s" % (user.oid, auth.policy.lower()) if auth.kind == "b2c" else user.oid
        return b64url(json.dumps({"uid": uid, "utid": user.home}, separators=(",", ":")).encode())

    @staticmethod
    def pairwise_sub(oid, client_id):
        return b64url(hashlib.sha256(("%s|%s" % (oid, client_id)).encode()).digest())[:43]

    def userinfo(self, req):
        auth_header = req.headers.get("Authorization", "")
        token = auth_header[7:].strip() if auth_header.lower().startswith("bearer ") else ""
        with self.lock:
            info = self.ats.get(hashlib.sha256(token.encode()).hexdigest()) if token else None
        if info is None or info["exp"] < time.time():
            if req.entry is not None:
                req.entry["error"] = "invalid_token"
            return json_response(401, {"error": {"code": "InvalidAuthenticationToken",
                                                 "message": "Access token is empty or invalid."}},
                                 [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        user = USERS[info["username"]]
        req.entry["user"] = user.username
        return json_response(200, {"sub": info["sub"], "name": user.name, "family_name": user.family_name,
                                   "given_name": user.given_name, "email": user.username})
