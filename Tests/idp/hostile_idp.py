"""A hostile identity provider on loopback, for brokerd's robustness tests (Python stdlib only).

    python3 Tests/idp/hostile_idp.py --state-dir DIR

It serves OIDC discovery, device authorization, authorization and token endpoints under one path prefix per
case: the authority http://127.0.0.1:PORT/<case> behaves as <case> says. A case is `normal` or
`<endpoint>-<behaviour>`, where <endpoint> is `discovery`, `device`, `token` or `idtoken`, and the endpoint
named misbehaves while the others answer well:

    notjson      200 with an HTML body
    bigbody      200 with a 64 MiB body (Content-Length announced)
    endless      200 with a chunked body that never ends
    drip         200 and headers at once, then the body one byte a second, forever
    driphead     the status line itself one byte a second
    headbomb     a header that never ends, sent as fast as the client reads
    hang         reads the request and never answers (until POST /test/release)
    redirect     a redirect to itself (a loop)
    deep         JSON nested 100,000 deep
    huge         absurdly large numbers (expires_in, interval, ...)
    negative     negative numbers
    missing-F    (token) the token response without field F
    iss, aud, nonce, exp   (idtoken) an id_token whose claim is wrong
    bignumber    (idtoken) an id_token with claims beyond any Double (1e400), as brokerd keeps them for accountClaims

Every token, refresh token, code and device code it hands out is listed by GET /test/secrets, so a test can check
that none of them reached a log or an error message. GET /test/stats reports requests per case, the requests held
open now (drip, hang), and how many body bytes the big bodies got out before the client hung up. Once ready it
writes DIR/ready.json ({"http": base URL, "pid"}); SIGTERM stops it.
"""

import argparse
import base64
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIG_BODY_BYTES = 64 << 20
DEEP = 100_000
TOKEN_FIELDS = ("access_token", "token_type", "expires_in", "refresh_token", "id_token", "scope")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.stopping = threading.Event()
        self.secrets = []
        self.requests = {}
        self.in_flight = {}
        self.body_bytes = {}
        self.codes = {}  # authorization code -> nonce
        self.device_scopes = {}  # device code -> the scope it was asked for

    def issue(self, prefix):
        value = "%s-%s" % (prefix, secrets.token_urlsafe(16))
        with self.lock:
            self.secrets.append(value)
        return value

    def count(self, table, key, delta=1):
        with self.lock:
            table[key] = table.get(key, 0) + delta


STATE = State()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims, raw_members=""):
    """An unsigned JWT; `raw_members` is JSON text added to the payload as written (json.dumps cannot write 1e400)."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    payload = json.dumps(claims)[:-1] + raw_members + "}"
    return "%s.%s.%s" % (header, b64url(payload.encode()), b64url(b"not-a-signature"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        sys.stderr.write("hostile-idp: %s\n" % (fmt % args))

    # --- routing -------------------------------------------------------------------------------------------

    def do_GET(self):
        self.route({})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        self.route({key: values[-1] for key, values in form.items()})

    def route(self, form):
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/test/"):
            return self.control(url.path)
        parts = url.path.strip("/").split("/")
        case, endpoint = parts[0], "/".join(parts[1:])
        STATE.count(STATE.requests, case)
        target, _, behaviour = case.partition("-")
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(url.query).items()}
        kind = {".well-known/openid-configuration": "discovery", "devicecode": "device", "token": "token",
                "authorize": "authorize"}.get(endpoint)
        if kind is None:
            return self.send_json(404, {"error": "not_found"})
        if kind == target and self.misbehave(case, behaviour):
            return
        if kind == "discovery":
            return self.send_json(200, self.discovery(case))
        if kind == "device":
            return self.send_json(200, self.device(behaviour if target == "device" else "", form))
        if kind == "authorize":
            return self.authorize(query)
        return self.send_json(200, self.tokens(case, target, behaviour, form))

    # --- well-behaved answers ------------------------------------------------------------------------------

    def base(self):
        return "http://%s:%d" % self.server.server_address[:2]

    def discovery(self, case):
        root = "%s/%s" % (self.base(), case)
        return {"issuer": root, "authorization_endpoint": root + "/authorize", "token_endpoint": root + "/token",
                "device_authorization_endpoint": root + "/devicecode", "response_types_supported": ["code"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["none"]}

    def device(self, behaviour, form):
        answer = {"device_code": STATE.issue("fake-hostile-device-code"), "user_code": "FAKE-HOSTILE",
                  "verification_uri": self.base() + "/device", "expires_in": 600, "interval": 1}
        with STATE.lock:
            STATE.device_scopes[answer["device_code"]] = form.get("scope", "")
        if behaviour == "huge":
            answer.update(expires_in=10 ** 18, interval=2 ** 63 - 1)
        elif behaviour == "negative":
            answer.update(expires_in=-2 ** 63, interval=-1)
        return answer

    def authorize(self, query):
        code = STATE.issue("fake-hostile-code")
        with STATE.lock:
            STATE.codes[code] = query.get("nonce")
        location = "%s?%s" % (query.get("redirect_uri", "/"),
                              urllib.parse.urlencode({"code": code, "state": query.get("state", "")}))
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def tokens(self, case, target, behaviour, form):
        now = int(time.time())
        with STATE.lock:
            nonce = STATE.codes.pop(form.get("code"), None)
            scope = form.get("scope") or STATE.device_scopes.get(form.get("device_code"), "")
        claims = {"iss": "%s/%s" % (self.base(), case), "aud": form.get("client_id", ""), "sub": "hostile-sub-" + case,
                  "exp": now + 3600, "iat": now, "preferred_username": case + "@hostile.test"}
        if nonce is not None:
            claims["nonce"] = nonce
        if target == "idtoken":
            claims.update({"iss": {"iss": "https://elsewhere.test/" + case},
                           "aud": {"aud": "some-other-client"},
                           "nonce": {"nonce": "not-the-nonce-that-was-sent"},
                           "exp": {"exp": now - 7200}}.get(behaviour, {}))
        answer = {"access_token": STATE.issue("fake-hostile-at"), "token_type": "Bearer", "expires_in": 3600,
                  "refresh_token": STATE.issue("fake-hostile-rt"), "scope": scope,
                  "id_token": jwt(claims, ', "big": 1e400, "tiny": -1e400' if case == "idtoken-bignumber" else "")}
        with STATE.lock:
            STATE.secrets.append(answer["id_token"])
        if target == "token":
            if behaviour == "huge":
                answer.update(expires_in=2 ** 63 - 1, ext_expires_in=1e300, refresh_in="9" * 30)
            elif behaviour == "negative":
                answer.update(expires_in=-2 ** 63, ext_expires_in=-1, refresh_in=-5)
            elif behaviour.startswith("missing-"):
                answer.pop(behaviour[len("missing-"):], None)
        return answer

    # --- misbehaviour --------------------------------------------------------------------------------------

    def misbehave(self, case, behaviour):
        if behaviour == "notjson":
            body = b"<html><body>Service temporarily in maintenance</body></html>"
            self.send_raw(200, body, "text/html")
        elif behaviour == "bigbody":
            self.send_big(case, chunked=False)
        elif behaviour == "endless":
            self.send_big(case, chunked=True)
        elif behaviour == "headbomb":
            self.send_endless_header(case)
        elif behaviour == "drip":
            self.held(case, self.drip_body)
        elif behaviour == "driphead":
            self.held(case, self.drip_head)
        elif behaviour == "hang":
            self.held(case, lambda: STATE.release.wait())
        elif behaviour == "redirect":
            self.send_response(307 if self.command == "POST" else 302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif behaviour == "deep":
            self.send_raw(200, b"[" * DEEP + b"]" * DEEP, "application/json")
        else:
            return False
        return True

    def held(self, case, action):
        STATE.count(STATE.in_flight, case)
        try:
            action()
        except OSError:
            pass  # the client gave up: what the test wants
        finally:
            STATE.count(STATE.in_flight, case, -1)
            self.close_connection = True

    def drip_body(self):
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        self.wfile.flush()
        self.drip(b'{"issuer":"' + b"x" * 999_000)

    def drip_head(self):
        self.drip(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: " + b"y" * 100_000)

    def drip(self, data):
        for byte in data:
            if STATE.release.is_set() or STATE.stopping.is_set():
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(1)

    def send_big(self, case, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(BIG_BODY_BYTES))
        self.end_headers()
        block = b'{"pad":"' + b"z" * (65536 - 8)
        sent = 0
        try:
            while chunked or sent < BIG_BODY_BYTES:
                if STATE.stopping.is_set():
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                sent += len(block)
                STATE.count(STATE.body_bytes, case, len(block))
        except OSError:
            pass  # the client stopped reading and closed: the point of the case
        self.close_connection = True

    def send_endless_header(self, case):
        block = b"a" * 65536
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Bomb: ")
            while not STATE.stopping.is_set():
                self.wfile.write(block)
                STATE.count(STATE.body_bytes, case, len(block))
        except OSError:
            pass
        self.close_connection = True

    # --- plumbing ------------------------------------------------------------------------------------------

    def control(self, path):
        if path == "/test/secrets":
            with STATE.lock:
                return self.send_json(200, {"secrets": list(STATE.secrets)})
        if path == "/test/stats":
            with STATE.lock:
                return self.send_json(200, {"requests": dict(STATE.requests), "in_flight": dict(STATE.in_flight),
                                            "body_bytes": dict(STATE.body_bytes)})
        if path == "/test/release":
            STATE.release.set()
            return self.send_json(200, {"released": True})
        return self.send_json(404, {"error": "not_found"})

    def send_json(self, status, value):
        self.send_raw(status, json.dumps(value).encode(), "application/json")

    def send_raw(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    def stop(*_):
        STATE.stopping.set()
        STATE.release.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ready_path = os.path.join(args.state_dir, "ready.json")
    temporary = ready_path + ".tmp"
    with open(temporary, "w") as ready:
        json.dump({"http": "http://127.0.0.1:%d" % server.server_address[1], "pid": os.getpid()}, ready)
    os.replace(temporary, ready_path)
    server.serve_forever()
    os.unlink(ready_path)


if __name__ == "__main__":
    main()
