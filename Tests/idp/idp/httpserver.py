"""A small threaded HTTP/1.1 (keep-alive) WSGI server, plain or TLS.

Each connection gets a thread; TCP_NODELAY is set on every accepted socket (a
keep-alive client would otherwise see ~40 ms delayed-ACK stalls) and each response
goes out in a single write. The TLS handshake runs in the connection's thread.
"""

import io
import socket
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

MAX_BODY = 4 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "brokerd-test-idp"
    sys_version = ""
    timeout = 120  # idle keep-alive connections are dropped after this

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            self.request.do_handshake()
        super().setup()

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("idp %s %s\n" % (self.server.scheme, fmt % args))

    def log_request(self, code="-", size="-"):
        if self.server.verbose:  # path only: query strings may carry codes/states
            self.log_message('"%s %s" %s', self.command, self.path.split("?")[0], code)

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def _environ(self, body):
        path, _, query = self.path.partition("?")
        if "://" in path:  # absolute-form request target
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        env = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "SERVER_NAME": self.server.server_address[0],
            "SERVER_PORT": str(self.server.server_address[1]),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_PORT": str(self.client_address[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": self.server.scheme,
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        if self.server.scheme == "https":
            env["HTTPS"] = "on"
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH", "HTTP_TRANSFER_ENCODING"):
                continue
            env[key] = env[key] + "," + value if key in env else value
        return env

    def _handle(self):
        try:
            body = self._read_body()
        except ValueError:
            self.send_error(413)
            self.close_connection = True
            return
        status_headers = []

        def start_response(status, headers, exc_info=None):
            status_headers[:] = [status, headers]
            return lambda data: None  # legacy write() unused by Django

        result = self.server.app(self._environ(body), start_response)
        try:
            payload = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        status, headers = status_headers
        code = int(status.split()[0])
        names = {name.lower() for name, _ in headers}
        if "date" not in names:
            headers.append(("Date", self.date_time_string()))
        if "content-length" not in names:
            headers.append(("Content-Length", str(len(payload))))
        if self.close_connection:
            headers.append(("Connection", "close"))
        lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head if self.command == "HEAD" else head + payload)
        self.log_request(code, len(payload))

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = _handle


class WSGIServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, host, port, app, ssl_context=None, verbose=False):
        self.app = app
        self.ssl_context = ssl_context
        self.scheme = "https" if ssl_context else "http"
        self.verbose = verbose
        super().__init__((host, port), _Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context:
            sock = self.ssl_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError, socket.timeout)):
            return  # clients hanging up, failed handshakes (e.g. untrusted CA)
        super().handle_error(request, client_address)


def tls_context(cert_file, key_file):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
