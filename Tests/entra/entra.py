#!/usr/bin/env python3
"""Entra ID (Microsoft identity platform v2.0) emulator for brokerd's tests.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.

    python3 Tests/entra/entra.py --state-dir DIR [--http-port 0] [--https-port 0] [--san NAME]... [--watch-stdin] [--verbose]

Python 3.11 standard library only, plus the `openssl` command line for the certificates. Serves
the same emulator on an http and an https listener on 127.0.0.1, writes DIR/ready.json
atomically when both accept connections and prints `ENTRA READY <same JSON>`. SIGTERM/SIGINT:
stops, deletes ready.json, prints `ENTRA STOPPED`, exit 0. See README.md.
"""

import argparse
import http.cookies
import http.server
import json
import os
import signal
import socket
import ssl
import sys
import threading
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from entra_control import Response  # noqa: E402
from entra_crypto import RSASigningKey, ensure_pki, openssl_available, write_json_atomically  # noqa: E402
from entra_protocol import Emulator  # noqa: E402

MAX_BODY = 1 << 20
GUID_CHARS = set("0123456789abcdefABCDEF-")


class Request:
    """What the emulator sees of one HTTP request."""

    def __init__(self, method, path, raw_query, form, headers, scheme):
        self.method, self.path, self.raw_query, self.headers = method, path, raw_query, headers
        self.query = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
        self.form = form
        self.host = headers.get("Host") or "127.0.0.1"
        self.base = "%s://%s" % (scheme, self.host)
        cookies = http.cookies.SimpleCookie()
        try:
            cookies.load(headers.get("Cookie", ""))
        except http.cookies.CookieError:
            pass
        self.cookies = {k: m.value for k, m in cookies.items()}
        given = (headers.get("client-request-id") or "").strip()
        self.correlation_id = given if given and len(given) <= 64 and set(given) <= GUID_CHARS else str(uuid.uuid4())
        self.entry = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "EntraEmulator/1.0"
    sys_version = ""
    timeout = 120  # idle keep-alive connections end after this

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)
            self.request.do_handshake()
        super().setup()

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("entra: %s %s\n" % (self.address_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        if self.server.verbose:
            sys.stderr.write("entra: %s %s %s\n" % (self.command, self.path.split("?")[0], code))

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def _handle(self):
        try:
            body = self._body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send(Response(400, b'{"error":"invalid_request"}'))
            return
        path, _, raw_query = self.path.partition("?")
        if path.startswith("http://") or path.startswith("https://"):
            path = "/" + path.split("/", 3)[-1]
        form = {}
        if body and "application/x-www-form-urlencoded" in self.headers.get("Content-Type", "application/x-www-form-urlencoded"):
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        req = Request(self.command, path, raw_query, form, self.headers, self.server.scheme)
        try:
            response = self.server.emulator.handle(req)
        except Exception as error:  # a bug in the emulator: answer 500, keep serving
            import traceback
            traceback.print_exc()
            response = Response(500, json.dumps({"error": "server_error", "error_description": repr(error)}).encode())
        if self.headers.get("client-request-id"):
            response.headers.append(("client-request-id", req.correlation_id))
        self._send(response)

    def _send(self, response):
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _handle


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, emulator, scheme, context=None, verbose=False):
        self.emulator, self.scheme, self.context, self.verbose = emulator, scheme, context, verbose
        super().__init__(address, Handler)

    def get_request(self):
        sock, address = self.socket.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            # The handshake happens in the connection's own thread (Handler.setup), not in the accept loop.
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--http-port", type=int, default=0)
    parser.add_argument("--https-port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--san", action="append", default=[], metavar="DNS_NAME",
                        help="extra DNS name for the https certificate (repeatable), e.g. login.microsoftonline.com")
    parser.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    if not openssl_available():
        sys.exit("entra.py: the openssl command line is required (apt-get install openssl)")
    state_dir = os.path.abspath(args.state_dir)
    os.makedirs(state_dir, exist_ok=True)
    ready_path = os.path.join(state_dir, "ready.json")
    if os.path.exists(ready_path):
        os.remove(ready_path)
    files = ensure_pki(state_dir, args.san)
    key = RSASigningKey(files["signing-key"], files["signing-cert"],
                        use_libcrypto=os.environ.get("ENTRA_PURE_PYTHON_RSA", "") in ("", "0"))
    emulator = Emulator(key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files["server"], files["server-key"])
    http_server = Server((args.host, args.http_port), emulator, "http", verbose=args.verbose)
    https_server = Server((args.host, args.https_port), emulator, "https", context, verbose=args.verbose)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
               for s in (http_server, https_server)]
    for thread in threads:
        thread.start()
    if args.watch_stdin:
        def watch():
            while sys.stdin.buffer.read(4096):
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    host = args.host if ":" not in args.host else "[%s]" % args.host
    ready = {"http": "http://%s:%d" % (host, http_server.server_address[1]),
             "https": "https://%s:%d" % (host, https_server.server_address[1]),
             "ca": files["ca"], "pid": os.getpid()}
    write_json_atomically(ready_path, ready)
    print("ENTRA READY " + json.dumps(ready), flush=True)

    while not stop.wait(1.0):
        pass
    for server in (http_server, https_server):
        server.shutdown()
        server.server_close()
    try:
        os.remove(ready_path)
    except FileNotFoundError:
        pass
    print("ENTRA STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
