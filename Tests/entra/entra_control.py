"""Test-control side of the Entra ID test emulator: settings, request log, injected failures, /test/ endpoints.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.
"""

import collections
import copy
import html
import json
import os
import time
import uuid
from dataclasses import dataclass, field

import entra_directory
from entra_directory import CLIENTS, TENANTS, USERS, message, resolve_signin

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"

DEFAULT_CONFIG = {
    "access_token_expire_seconds": 3599,
    "refresh_in_seconds": 0,  # 0 = no "refresh_in" in token answers
    "id_token_expire_seconds": 3600,
    "id_token_clock_ahead_seconds": 0,  # id_token iat/nbf/exp this far ahead: the client's clock looks behind
    "authorization_code_expire_seconds": 600,
    "refresh_token_expire_seconds": 0,  # inactivity limit; 0 = never
    "rotate_refresh_tokens": 1,  # 1 = a new refresh token on every refresh
    "old_refresh_token_valid": 1,  # 1 = a rotated-away refresh token keeps working (Entra does so)
    "device_code_expire_seconds": 900,
    "device_flow_interval": 5,
    "device_slow_down": 1,  # 1 = a poll sooner than interval-0.25 s answers slow_down
}

# The error code a /test/fail-next rule gets when it names none.
DEFAULT_CODES = {
    "invalid_grant": 70008, "interaction_required": 50076, "invalid_client": 700016, "unauthorized_client": 700016,
    "invalid_scope": 70011, "consent_required": 65001, "access_denied": 65004, "invalid_request": 900144,
    "login_required": 50058, "temporarily_unavailable": 90033, "server_error": 90033,
}

LOGGED_FIELDS = ("seq", "time", "method", "endpoint", "path", "tenant", "policy", "grant_type", "client_id", "scope",
                 "prompt", "login_hint", "has_claims", "claims", "user", "rt_client_id", "status", "error", "suberror",
                 "injected", "delay_ms")


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json; charset=utf-8"
    headers: list = field(default_factory=list)


def json_response(status, value, headers=None):
    return Response(status, json.dumps(value).encode(), headers=list(headers or []))


def html_response(status, text, headers=None):
    return Response(status, text.encode(), "text/html; charset=utf-8", list(headers or []))


def redirect(location, headers=None):
    return Response(302, b"", "text/plain", [("Location", location)] + list(headers or []))


def utc_timestamp(now=None):
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(now if now is not None else time.time()))


def load_config():
    config = dict(DEFAULT_CONFIG)
    for key in config:
        value = os.environ.get("ENTRA_" + key.upper())
        if value not in (None, ""):
            config[key] = int(value)
    return config


def first(value):
    return value[0] if isinstance(value, list) else value


class ControlMixin:
    """State for tests plus the /test/ endpoints. Needs self.lock, self.devices, self.rts, self.sessions."""

    def init_control(self):
        self.startup_config = load_config()
        self.config = dict(self.startup_config)
        self.log = collections.deque(maxlen=2000)
        self.seq = 0
        self.counters = self._empty_counters()
        self.faults = []
        self.delays = []
        self.next_signins = []  # [username, sticky]
        self.declines = 0
        self.declined_scopes = set()
        self.startup_resources = copy.deepcopy((entra_directory.RESOURCES, entra_directory.B2C_RESOURCES))

    @staticmethod
    def _empty_counters():
        return {"total": 0, "by_grant_type": collections.Counter(), "by_client": collections.Counter(),
                "by_status": collections.Counter(), "by_endpoint": collections.Counter()}

    # --- Entra-shaped errors -----------------------------------------------------------------------------------

    def error_body(self, req, error, codes, detail="", suberror=None, claims=None, description=None, extra=None):
        """{"error", "error_description": "AADSTSn: … Trace ID: … Correlation ID: … Timestamp: …", "error_codes", …}."""
        codes = [int(c) for c in (codes if isinstance(codes, (list, tuple)) else [codes])]
        stamp = utc_timestamp()
        trace = str(uuid.uuid4())
        correlation = req.correlation_id
        text = description if description is not None else message(codes[0], detail)
        body = {"error": error,
                "error_description": "%s Trace ID: %s Correlation ID: %s Timestamp: %s" % (text, trace, correlation, stamp),
                "error_codes": codes, "timestamp": stamp, "trace_id": trace, "correlation_id": correlation,
                "error_uri": "%s/error?code=%d" % (req.base, codes[0])}
        if suberror:
            body["suberror"] = suberror
        if claims:
            body["claims"] = claims
        body.update(extra or {})
        return body

    def error(self, req, status, error, codes, detail="", suberror=None, **kwargs):
        body = self.error_body(req, error, codes, detail, suberror, **kwargs)
        if req.entry is not None:
            req.entry["error"], req.entry["suberror"] = error, suberror
        return json_response(status, body, [("x-ms-request-id", body["trace_id"])])

    # --- request log --------------------------------------------------------------------------------------------

    def start_entry(self, req, endpoint, tenant=None, policy=None):
        with self.lock:
            self.seq += 1
            entry = {"seq": self.seq, "time": round(time.time(), 3), "method": req.method, "endpoint": endpoint,
                     "path": req.path, "tenant": tenant, "policy": policy or None, "grant_type": None,
                     "client_id": None, "scope": None, "prompt": None, "login_hint": None, "has_claims": False,
                     "claims": None, "user": None, "rt_client_id": None, "status": None, "error": None,
                     "suberror": None, "injected": False, "delay_ms": 0}
        req.entry = entry
        return entry

    def finish_entry(self, entry, status):
        entry["status"] = status
        with self.lock:
            self.log.append(entry)
            c = self.counters
            c["by_endpoint"][entry["endpoint"]] += 1
            if entry["endpoint"] == "token":
                c["total"] += 1
                c["by_grant_type"][entry["grant_type"] or ""] += 1
                c["by_client"][entry["client_id"] or ""] += 1
                c["by_status"][str(status)] += 1

    @staticmethod
    def record_claims(entry, claims_text):
        """Records a claims request (JSON, not secret) in the log entry. Returns (parsed JSON or None, malformed?)."""
        if not claims_text:
            return None, False
        entry["has_claims"] = True
        try:
            parsed = json.loads(claims_text)
        except ValueError:
            entry["claims"] = claims_text  # kept verbatim so a test can see what was sent
            return None, True
        entry["claims"] = parsed
        return parsed, False

    # --- injected behaviour ---------------------------------------------------------------------------------------

    def take_fault(self, endpoint, grant_type=None, client_id=None):
        with self.lock:
            for rule in self.faults:
                if rule["endpoint"] not in (endpoint, "any"):
                    continue
                if rule["grant_type"] and rule["grant_type"] != grant_type:
                    continue
                if rule["client_id"] and rule["client_id"] != client_id:
                    continue
                rule["count"] -= 1
                if rule["count"] <= 0:
                    self.faults.remove(rule)
                return dict(rule)
        return None

    def fault_response(self, req, rule):
        req.entry["injected"] = True
        status = rule["status"]
        body = self.error_body(req, rule["error"], rule["error_codes"], suberror=rule["suberror"],
                               claims=rule["claims"], description=rule["description"])
        if rule["additional_info"]:
            body["error_additional_info"] = rule["additional_info"]
        req.entry["error"], req.entry["suberror"] = rule["error"], rule["suberror"]
        headers = [("x-ms-request-id", body["trace_id"])]
        if rule["retry_after"]:
            headers.append(("Retry-After", rule["retry_after"]))
        return json_response(status, body, headers)

    def take_delay(self, endpoint):
        with self.lock:
            for rule in self.delays:
                if rule["endpoint"] in (endpoint, "any"):
                    if rule["count"] > 0:
                        rule["count"] -= 1
                        if rule["count"] == 0:
                            self.delays.remove(rule)
                    return rule["ms"]
        return 0

    def take_next_signin(self):
        with self.lock:
            if self.declines > 0:
                self.declines -= 1
                return "decline"
            if self.next_signins:
                username, sticky = self.next_signins[0]
                if not sticky:
                    self.next_signins.pop(0)
                return username
        return None

    # --- /test/ endpoints -------------------------------------------------------------------------------------------

    def control(self, req, name):
        p = {k: first(v) for k, v in req.query.items()}
        p.update({k: first(v) for k, v in req.form.items()})
        handler = getattr(self, "ctl_" + name.replace("-", "_"), None)
        if handler is None:
            return json_response(404, {"error": "not_found", "path": req.path})
        if req.method != "POST" and name not in ("requests", "faults", "config", "directory"):
            return json_response(405, {"error": "method_not_allowed", "use": "POST"})
        try:
            return handler(req, p)
        except (ValueError, KeyError) as error:
            return json_response(400, {"error": "bad_request", "detail": str(error)})

    def ctl_requests(self, req, p):
        limit = int(p.get("limit", 200))
        endpoint = p.get("endpoint")
        with self.lock:
            entries = [e for e in self.log if not endpoint or e["endpoint"] == endpoint]
            c = self.counters
            answer = {"total": c["total"], "by_grant_type": dict(c["by_grant_type"]), "by_client": dict(c["by_client"]),
                      "by_status": dict(c["by_status"]), "by_endpoint": dict(c["by_endpoint"]),
                      "recent": [{k: e[k] for k in LOGGED_FIELDS} for e in entries[-limit:]] if limit > 0 else []}
        return json_response(200, answer)

    def ctl_reset_requests(self, req, p):
        with self.lock:
            self.log.clear()
            self.counters = self._empty_counters()
        return json_response(200, {"ok": True})

    def ctl_reset(self, req, p):
        with self.lock:
            self.log.clear()
            self.counters = self._empty_counters()
            self.faults, self.delays, self.next_signins = [], [], []
            self.declines = 0
            self.declined_scopes = set()
            self.sessions.clear()
            self.config = dict(self.startup_config)
            for live, saved in zip((entra_directory.RESOURCES, entra_directory.B2C_RESOURCES),
                                   copy.deepcopy(self.startup_resources)):
                live.clear()
                live.update(saved)
        return json_response(200, {"ok": True})

    def ctl_fail_next(self, req, p):
        status = int(p.get("status", 400))
        error = p.get("error") or ("temporarily_unavailable" if status >= 500 else "invalid_grant")
        codes = [int(c) for c in p["error_codes"].split(",")] if p.get("error_codes") else [DEFAULT_CODES.get(error, 90000)]
        suberror = p.get("suberror") or None
        additional = [s for s in p.get("additional_info", "").split(",") if s]
        if suberror == "client_mismatch" and "client_mismatch" not in additional:
            additional.append("client_mismatch")
        claims = p.get("claims") or None
        if claims:
            json.loads(claims)  # must be JSON; answered as the string Entra sends
        endpoint = p.get("endpoint", "token")
        if endpoint not in ("token", "authorize", "devicecode", "any"):
            raise ValueError("endpoint must be token, authorize, devicecode or any")
        rule = {"endpoint": endpoint, "status": status, "error": error, "error_codes": codes, "suberror": suberror,
                "claims": claims, "count": int(p.get("count", 1)), "grant_type": p.get("grant_type") or None,
                "client_id": p.get("client_id") or None, "description": p.get("description") or None,
                "retry_after": p.get("retry_after") or None, "additional_info": additional}
        if rule["grant_type"] == "device_code":
            rule["grant_type"] = DEVICE_GRANT
        with self.lock:
            self.faults.append(rule)
        return json_response(200, {"ok": True, "rule": rule})

    def ctl_faults(self, req, p):
        with self.lock:
            return json_response(200, {"faults": list(self.faults), "delays": list(self.delays)})

    def ctl_delay(self, req, p):
        ms = int(p.get("ms", 0))
        with self.lock:
            if ms <= 0:
                self.delays = []
            else:
                self.delays.append({"endpoint": p.get("endpoint", "token"), "ms": ms, "count": int(p.get("count", 0))})
        return json_response(200, {"ok": True})

    def ctl_decline_next_signin(self, req, p):
        with self.lock:
            self.declines += int(p.get("count", 1))
        return json_response(200, {"ok": True})

    def ctl_next_signin(self, req, p):
        username = p["username"].lower()
        if username not in USERS:
            return json_response(404, {"error": "unknown_user", "username": username})
        sticky = p.get("sticky") in ("1", "true")
        with self.lock:
            self.next_signins.extend([[username, sticky]] * int(p.get("count", 1)))
        return json_response(200, {"ok": True})

    def _device_for(self, p):
        code = "".join(ch for ch in p.get("user_code", "").upper() if ch.isalnum())
        with self.lock:
            candidates = [d for d in self.devices.values() if (d["user_code"] == code if code else True)]
            if not code:
                candidates = [d for d in candidates if d["status"] == "pending"]
        return max(candidates, key=lambda d: d["issued"]) if candidates else None

    def ctl_approve_device(self, req, p):
        device = self._device_for(p)
        if device is None:
            return json_response(404, {"error": "unknown_user_code"})
        user = USERS.get(p.get("username", "").lower())
        if user is None:
            return json_response(404, {"error": "unknown_user"})
        tenant_id, oid = resolve_signin(user, device["authority"])
        if tenant_id is None:
            return json_response(400, {"error": "user_not_allowed", "aadsts": oid, "detail": message(oid)})
        with self.lock:
            if device["status"] != "pending":
                return json_response(409, {"error": "not_pending", "status": device["status"]})
            device.update(status="approved", username=user.username, tenant_id=tenant_id, oid=oid)
        return json_response(200, {"ok": True, "user_code": device["user_code"]})

    def ctl_deny_device(self, req, p):
        device = self._device_for(p)
        if device is None:
            return json_response(404, {"error": "unknown_user_code"})
        with self.lock:
            if device["status"] != "pending":
                return json_response(409, {"error": "not_pending", "status": device["status"]})
            device["status"] = "denied"
        return json_response(200, {"ok": True, "user_code": device["user_code"]})

    def ctl_expire_device(self, req, p):
        device = self._device_for(p)
        if device is None:
            return json_response(404, {"error": "unknown_user_code"})
        with self.lock:
            device["expires"] = 0
        return json_response(200, {"ok": True, "user_code": device["user_code"]})

    def ctl_revoke_refresh_tokens(self, req, p):
        username = p["username"].lower()
        client_id = p.get("client_id")
        count = 0
        with self.lock:
            for record in self.rts.values():
                if record["username"] == username and not record["revoked"] and \
                        (not client_id or record["client_id"] == client_id):
                    record["revoked"] = True
                    count += 1
        return json_response(200, {"ok": True, "revoked": count})

    def ctl_decline_scope(self, req, p):
        with self.lock:
            self.declined_scopes.add(p["scope"])
        return json_response(200, {"ok": True, "declined": sorted(self.declined_scopes)})

    def ctl_resource(self, req, p):
        """Adds or replaces a resource: ?resource=api://x&permissions=A,B[&default=A][&b2c=1]."""
        permissions = [s for s in p["permissions"].split(",") if s]
        default = [s for s in p.get("default", "").split(",") if s] or permissions
        if not permissions or not set(default) <= set(permissions):
            raise ValueError("permissions must be non-empty and include every default permission")
        table = entra_directory.B2C_RESOURCES if p.get("b2c") in ("1", "true") else entra_directory.RESOURCES
        with self.lock:
            table[p["resource"]] = {"permissions": permissions, "default": default}
        return json_response(200, {"ok": True, "resource": p["resource"], "permissions": permissions, "default": default})

    def ctl_config(self, req, p):
        with self.lock:
            for key, value in p.items():
                if key not in self.config:
                    raise ValueError("unknown setting %s" % key)
                self.config[key] = int(value)
            return json_response(200, dict(self.config))

    def ctl_directory(self, req, p):
        return json_response(200, {
            "tenants": [{"id": t.id, "name": t.name, "kind": t.kind, "domains": t.domains, "policies": t.policies}
                        for t in TENANTS.values()],
            "users": [{"username": u.username, "password": u.password, "name": u.name, "kind": u.kind,
                       "home_tenant": u.home, "oid": u.oid, "guest_oids": u.guest_oids} for u in USERS.values()],
            "clients": [{"client_id": c.id, "name": c.name, "family": c.family} for c in CLIENTS.values()]})


def page(title, body):
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>%s</title></head><body>"
            "<p><small>Test emulator of the Microsoft identity platform (brokerd tests). Not Microsoft; test accounts only."
            "</small></p><h1>%s</h1>%s</body></html>") % (html.escape(title), html.escape(title), body)
