"""Token side of the Entra ID test emulator: the token endpoint's grants, device code, token minting.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.
"""

import base64
import hashlib
import html
import secrets
import time
import uuid

from entra_control import DEVICE_GRANT, first, html_response, json_response, page
from entra_crypto import b64url
from entra_directory import (CLIENTS, MSA, USERS, ScopeError, message, parse_scopes, resolve_signin)

USER_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
B2C_REFRESH_TOKEN_LIFETIME = 1209600


class TokenMixin:
    # --- token endpoint ---------------------------------------------------------------------------------------

    def token(self, req, auth):
        f = {k: first(v) for k, v in req.form.items()}
        e = req.entry
        grant = f.get("grant_type")
        e.update(grant_type=grant, client_id=f.get("client_id"), scope=f.get("scope"))
        if req.method != "POST":
            return self.error(req, 400, "invalid_request", 900561)
        claims, bad_claims = self.record_claims(e, f.get("claims"))  # recorded even when a failure is injected
        rule = self.take_fault("token", grant, f.get("client_id"))
        if rule is not None:
            return self.fault_response(req, rule)
        if not grant:
            return self.error(req, 400, "invalid_request", 900144, "grant_type")
        if not f.get("client_id"):
            return self.error(req, 400, "invalid_request", 900144, "client_id")
        client = CLIENTS.get(f["client_id"])
        if client is None:
            return self.error(req, 400, "unauthorized_client", 700016,
                              f["client_id"])
        if f.get("client_secret") or f.get("client_assertion"):
            return self.error(req, 401, "invalid_client", 700025)
        if bad_claims:
            return self.error(req, 400, "invalid_request", 90015)
        try:
            if grant == "authorization_code":
                return self.grant_code(req, auth, f, client, claims)
            if grant == "refresh_token":
                return self.grant_refresh(req, auth, f, client, claims)
            if grant in (DEVICE_GRANT, "device_code"):
                return self.grant_device(req, auth, f, client, claims)
        except ScopeError as error:
            return self.error(req, 400, error.error, error.code, error.detail)
        return self.error(req, 400, "unsupported_grant_type", 70003, "Grant type '%s'." % grant)

    def grant_code(self, req, auth, f, client, claims):
        code = f.get("code")
        if not code:
            return self.error(req, 400, "invalid_request", 900144, "code")
        with self.lock:
            record = self.codes.get(code)
        if record is None or record["kind"] != auth.kind or \
                (auth.kind == "b2c" and record["authority"].policy != auth.policy):
            return self.error(req, 400, "invalid_grant", 9002313, "The authorization code is not valid.")
        if record["used"]:
            return self.error(req, 400, "invalid_grant", 54005)
        if time.time() - record["issued"] > self.config["authorization_code_expire_seconds"]:
            return self.error(req, 400, "invalid_grant", 70008)
        if record["client_id"] != client.id:
            return self.error(req, 400, "invalid_grant", 70000, "The code was issued to another application.",
                              description=message(70000).replace("'refresh_token'", "'code'") +
                              " The code was issued to another application.")
        if f.get("redirect_uri") != record["redirect_uri"]:
            return self.error(req, 400, "invalid_grant", 500112, "Expected '%s'." % record["redirect_uri"])
        verifier = f.get("code_verifier")
        if not verifier:
            return self.error(req, 400, "invalid_request", 900144, "code_verifier")
        if b64url(hashlib.sha256(verifier.encode()).digest()) != record["challenge"]:
            return self.error(req, 400, "invalid_grant", 50148)
        with self.lock:
            if record["used"]:
                return self.error(req, 400, "invalid_grant", 54005)
            record["used"] = True
        scope_text = f.get("scope") or record["scope"]
        scopes = parse_scopes(scope_text, auth.kind, client.id)
        merged = claims if claims is not None else record["claims"]
        return self.issue(req, auth, client, USERS[record["username"]], record["tenant_id"], record["oid"], scopes,
                          merged, record["nonce"], "offline_access" in scopes["oidc"])

    def grant_refresh(self, req, auth, f, client, claims):
        token = f.get("refresh_token")
        if not token:
            return self.error(req, 400, "invalid_request", 900144, "refresh_token")
        now = time.time()
        with self.lock:
            record = self.rts.get(token)
        if record is None:
            return self.error(req, 400, "invalid_grant", 9002313, "The refresh token is malformed or not valid.")
        req.entry["rt_client_id"] = record["client_id"]
        req.entry["user"] = record["username"]
        if record["kind"] != auth.kind or (auth.kind == "b2c" and (record["policy"] != auth.policy or
                                                                   record["tenant_id"] != auth.tenant.id)):
            return self.error(req, 400, "invalid_grant", 9002313, "The refresh token was issued for another authority.")
        if record["client_id"] != client.id and not (record["family"] and record["family"] == client.family):
            # Entra names this with suberror client_mismatch; MSAL Python looks for it in error_additional_info.
            return self.error(req, 400, "invalid_grant", 70000,
                              "The refresh token was issued to a different client and this client is not in its family.",
                              suberror="client_mismatch", extra={"error_additional_info": ["client_mismatch"]})
        user = USERS[record["username"]]
        tenant_id, oid = resolve_signin(user, auth)
        if tenant_id is None:
            return self.error(req, 400, "invalid_grant", oid, "User '%s'." % user.username)
        scopes = parse_scopes(f.get("scope") or record["scope"], auth.kind, client.id)
        with self.lock:  # check and rotate atomically: of two concurrent uses only one sees a fresh token
            if record["revoked"]:
                return self.error(req, 400, "invalid_grant", 50173, suberror="bad_token")
            if record["superseded"] and not self.config["old_refresh_token_valid"]:
                return self.error(req, 400, "invalid_grant", 70000, "The refresh token was already rotated.",
                                  suberror="bad_token")
            limit = self.config["refresh_token_expire_seconds"]
            if limit and now - record["last_used"] > limit:
                return self.error(req, 400, "invalid_grant", 700082, suberror="bad_token")
            record["last_used"] = now
            if self.config["rotate_refresh_tokens"]:
                record["superseded"] = True
        return self.issue(req, auth, client, user, tenant_id, oid, scopes, claims, None, True, record)

    def grant_device(self, req, auth, f, client, claims):
        device_code = f.get("device_code") or f.get("code")
        if not device_code:
            return self.error(req, 400, "invalid_request", 900144, "device_code")
        now = time.time()
        with self.lock:
            device = self.devices.get(device_code)
            if device is None or device["client_id"] != client.id or device["authority"].kind != auth.kind:
                return self.error(req, 400, "bad_verification_code", 70018)
            if device["status"] == "redeemed":
                return self.error(req, 400, "invalid_grant", 54005, "The device code was already redeemed.")
            if now > device["expires"]:
                return self.error(req, 400, "expired_token", 70019)
            if device["status"] == "denied":
                return self.error(req, 400, "authorization_declined", 70020)
            if device["status"] == "pending":
                last, device["last_poll"] = device["last_poll"], now
                if self.config["device_slow_down"] and last and now - last < device["interval"] - 0.25:
                    return self.error(req, 400, "slow_down", 70016, "Poll less often.")
                return self.error(req, 400, "authorization_pending", 70016)
            device["status"] = "redeemed"
        scopes = parse_scopes(device["scope"], auth.kind, client.id)
        return self.issue(req, auth, client, USERS[device["username"]], device["tenant_id"], device["oid"], scopes,
                          claims if claims is not None else device["claims"], None, "offline_access" in scopes["oidc"])

    # --- device authorization ------------------------------------------------------------------------------------

    def devicecode(self, req, auth):
        f = {k: first(v) for k, v in req.query.items()}
        f.update({k: first(v) for k, v in req.form.items()})
        e = req.entry
        e.update(client_id=f.get("client_id"), scope=f.get("scope"))
        if auth.kind == "b2c":
            return self.error(req, 400, "invalid_request", 70003, "B2C does not support the device code flow.")
        claims, bad_claims = self.record_claims(e, f.get("claims"))
        rule = self.take_fault("devicecode", None, f.get("client_id"))
        if rule is not None:
            return self.fault_response(req, rule)
        client = CLIENTS.get(f.get("client_id", ""))
        if client is None:
            return self.error(req, 400, "unauthorized_client", 700016, f.get("client_id", ""))
        if bad_claims:
            return self.error(req, 400, "invalid_request", 90015)
        try:
            parse_scopes(f.get("scope", ""), auth.kind, client.id)
        except ScopeError as error:
            return self.error(req, 400, error.error, error.code, error.detail)
        user_code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(9))
        device_code = "DAQABAAEAAA" + b64url(secrets.token_bytes(90))
        interval = self.config["device_flow_interval"]
        lifetime = self.config["device_code_expire_seconds"]
        now = time.time()
        with self.lock:
            self.devices[device_code] = {"user_code": user_code, "client_id": client.id, "authority": auth,
                                         "scope": f.get("scope", ""), "claims": claims, "issued": now,
                                         "expires": now + lifetime, "interval": interval, "status": "pending",
                                         "last_poll": 0, "username": None, "tenant_id": None, "oid": None}
        uri = req.base + "/devicelogin"
        return json_response(200, {
            "user_code": user_code, "device_code": device_code, "verification_uri": uri, "expires_in": lifetime,
            "interval": interval,
            "message": "To sign in, use a web browser to open the page %s and enter the code %s to authenticate."
                       % (uri, user_code)})

    def devicelogin(self, req):
        """The verification page: enter the code and the test user's credentials, then Continue or Deny."""
        form = {k: first(v) for k, v in req.form.items()}
        note = ""
        if req.method == "POST":
            p = {"user_code": form.get("otc", "")}
            device = self._device_for(p) if p["user_code"] else None
            user = USERS.get(form.get("username", "").strip().lower())
            if device is None:
                note = "That code was not recognized."
            elif form.get("action") == "deny":
                note = self.ctl_deny_device(req, p).body.decode()
            elif user is None or form.get("password") != user.password:
                note = message(50126)
            else:
                answer = self.ctl_approve_device(req, dict(p, username=user.username))
                if answer.status == 200:
                    req.entry["user"] = user.username
                    return html_response(200, page("You're signed in", "<p>You can close this window.</p>"))
                note = answer.body.decode()
        body = ('%s<form method="post"><label>Code <input name="otc"></label>'
                '<label>Email <input name="username"></label><label>Password <input type="password" name="password">'
                '</label><button name="action" value="approve">Continue</button>'
                '<button name="action" value="deny">Deny</button></form>') % (
            '<p id="error">%s</p>' % html.escape(note) if note else "")
        return html_response(200, page("Enter code", body))

    # --- minting ----------------------------------------------------------------------------------------------

    def issue(self, req, auth, client, user, tenant_id, oid, scopes, claims, nonce, with_rt, old_rt=None):
        cfg = self.config
        now = int(time.time())
        req.entry["user"] = user.username
        with self.lock:
            declined = set(self.declined_scopes)
        permissions = [s for s in scopes["permissions"] if s not in declined]
        scp = [short for full, short in zip(scopes["permissions"], scopes["scp"]) if full not in declined]
        oidc = [s for s in scopes["oidc"] if s != "offline_access" and s not in declined]
        lifetime = cfg["access_token_expire_seconds"]
        answer = {"token_type": "bearer" if auth.kind == "adfs" else "Bearer",
                  "scope": " ".join(permissions + oidc)}
        want_at = scopes["resource"] is not None
        if want_at:
            answer["expires_in"] = lifetime
            if auth.kind == "aad":
                answer["ext_expires_in"] = lifetime
                if cfg["refresh_in_seconds"] > 0:
                    answer["refresh_in"] = cfg["refresh_in_seconds"]
            answer["access_token"] = self.access_token(req, auth, client, user, tenant_id, oid, scopes["resource"],
                                                       scp, claims, now, lifetime)
        if auth.kind == "adfs":
            answer["resource"] = scopes["resource"]
        if with_rt:
            rotate = cfg["rotate_refresh_tokens"] or old_rt is None
            rt = self.new_refresh_token(auth, client, user, tenant_id, scopes, now) if rotate else old_rt["token"]
            if rotate and old_rt is not None:
                with self.lock:
                    old_rt["superseded"] = True
            answer["refresh_token"] = rt
            if auth.kind in ("b2c", "adfs"):
                answer["refresh_token_expires_in"] = B2C_REFRESH_TOKEN_LIFETIME
        if client.family and auth.kind == "aad":
            answer["foci"] = client.family
        if "openid" in scopes["oidc"]:
            answer["id_token"] = self.id_token(req, auth, client, user, tenant_id, oid, scopes, nonce, now)
            if auth.kind == "b2c":
                answer["id_token_expires_in"] = cfg["id_token_expire_seconds"]
        if auth.kind == "b2c":
            answer["not_before"] = now
        if req.form.get("client_info") in (["1"], "1") and auth.kind != "adfs":
            answer["client_info"] = self.client_info(user, auth)
        return json_response(200, answer, [("Cache-Control", "no-store"), ("Pragma", "no-cache"),
                                           ("x-ms-request-id", str(uuid.uuid4()))])

    def new_refresh_token(self, auth, client, user, tenant_id, scopes, now):
        prefix = "M.C5" if user.kind == "msa" else ("" if auth.kind == "adfs" else "1.A")
        token = prefix + b64url(secrets.token_bytes(180))
        in_family = bool(client.family) and auth.kind == "aad"
        with self.lock:
            self.rts[token] = {"token": token, "client_id": client.id, "family": client.family if in_family else "",
                               "username": user.username, "kind": auth.kind,
                               "tenant_id": auth.tenant.id if auth.kind == "b2c" else tenant_id,
                               "policy": auth.policy, "scope": " ".join(scopes["requested"]),
                               "created": now, "last_used": now, "revoked": False, "superseded": False}
        return token

    def issuer_for(self, req, auth, tenant_id):
        return auth.issuer(req.base, tenant_id if auth.kind == "aad" else None)

    def id_token(self, req, auth, client, user, tenant_id, oid, scopes, nonce, now):
        now += self.config["id_token_clock_ahead_seconds"]
        exp = now + self.config["id_token_expire_seconds"]
        if auth.kind == "adfs":
            sub = base64.b64encode(hashlib.sha256(("%s|%s" % (user.username, client.id)).encode()).digest()).decode()
            claims = {"aud": client.id, "iss": self.issuer_for(req, auth, None), "iat": now, "nbf": now, "exp": exp,
                      "auth_time": now, "sub": sub, "upn": user.username,
                      "unique_name": "CORP\\" + user.username.split("@")[0], "sid": "S-1-5-21-1000-2000-3000-1104",
                      "apptype": "Public", "appid": client.id, "authmethod": "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport",
                      "ver": "1.0", "scp": " ".join(scopes["requested"])}
        elif auth.kind == "b2c":
            claims = {"exp": exp, "nbf": now, "ver": "1.0", "iss": self.issuer_for(req, auth, None), "sub": oid,
                      "aud": client.id, "iat": now, "auth_time": now, "oid": oid, "name": user.name,
                      "given_name": user.given_name, "family_name": user.family_name, "emails": [user.username],
                      "tfp": auth.policy, "acr": auth.policy.lower()}
        else:
            claims = {"aud": client.id, "iss": self.issuer_for(req, auth, tenant_id), "iat": now, "nbf": now,
                      "exp": exp, "name": user.name, "oid": oid, "preferred_username": user.username,
                      "rh": "0.A" + b64url(secrets.token_bytes(12)), "sid": str(uuid.uuid5(uuid.NAMESPACE_URL, oid)),
                      "sub": self.pairwise_sub(oid, client.id), "tid": tenant_id,
                      "uti": b64url(secrets.token_bytes(16)), "ver": "2.0"}
            if "email" in scopes["oidc"]:
                claims["email"] = user.username
            if user.kind == "msa" and tenant_id == MSA:
                claims["idp"] = "live.com"
            elif tenant_id != user.home:  # a guest: the home tenant is the identity provider
                claims["idp"] = "https://sts.windows.net/%s/" % user.home
        if nonce:
            claims["nonce"] = nonce
        return self.key.jwt(claims)

    def access_token(self, req, auth, client, user, tenant_id, oid, resource, scp, claims, now, lifetime):
        body = {"aud": resource, "iss": self.issuer_for(req, auth, tenant_id), "iat": now, "nbf": now,
                "exp": now + lifetime, "azp": client.id, "name": user.name, "scp": " ".join(scp),
                "uti": b64url(secrets.token_bytes(16)), "ver": "2.0" if auth.kind != "adfs" else "1.0"}
        if auth.kind == "adfs":
            body.update(upn=user.username, appid=client.id, sub=user.username)
        else:
            body.update(oid=oid, sub=self.pairwise_sub(oid, resource),
                        preferred_username=user.username if auth.kind == "aad" else None)
            if auth.kind == "aad":
                body["tid"] = tenant_id
            else:
                body["tfp"] = auth.policy
        capabilities = (((claims or {}).get("access_token") or {}).get("xms_cc") or {}).get("values")
        if capabilities:
            body["xms_cc"] = capabilities
        body = {k: v for k, v in body.items() if v is not None}
        token = self.key.jwt(body)
        with self.lock:
            self.ats[hashlib.sha256(token.encode()).hexdigest()] = {
                "username": user.username, "sub": self.pairwise_sub(oid or user.username, client.id),
                "exp": now + lifetime}
        return token
