#!/usr/bin/env python3
"""Runs brokerd's test-only OAuth2/OIDC server (see README.md).

    VENV/bin/python Tests/idp/serve.py --state-dir DIR [--http-port 0] [--https-port 0]

Creates DIR, its sqlite database (migrated and seeded), ca.pem (a throwaway CA)
and, once both listeners accept connections, DIR/ready.json plus one stdout line
"IDP READY {...}". SIGTERM or SIGINT stops it (and removes ready.json).
"""

import argparse
import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

USERS = [("alice", "Alice", "Anderson"), ("bob", "Bob", "Brown")]
CLIENT_IDS = ["brokerd-test-app-a", "brokerd-test-app-b", "brokerd-test-app-c"]
LOOPBACK_REDIRECTS = "http://127.0.0.1/ http://localhost/ http://[::1]/"


def seed():
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    users = get_user_model()
    for username, first, last in USERS:
        user, _ = users.objects.get_or_create(username=username)
        user.first_name, user.last_name = first, last
        user.email = f"{username}@example.test"
        user.set_password(f"{username}-password")
        user.save()
    apps = get_application_model()
    for client_id in CLIENT_IDS:
        apps.objects.update_or_create(client_id=client_id, defaults={
            "name": client_id,
            "client_type": apps.CLIENT_PUBLIC,
            "authorization_grant_type": apps.GRANT_AUTHORIZATION_CODE,  # validator allows more
            "client_secret": "",
            "hash_client_secret": False,
            "redirect_uris": LOOPBACK_REDIRECTS,
            "skip_authorization": True,  # no consent screen
            "algorithm": apps.RS256_ALGORITHM,
        })


def migrate(db_path: Path, call_command):
    """Runs the migrations. A fresh database is copied from a migrated template cached
    in the venv (made on first use; saves ~2 s of migrations per fresh state dir)."""
    import django
    import oauth2_provider

    template = Path(sys.prefix) / (
        f"idp-db-template-django{django.__version__}-dot{oauth2_provider.__version__}.sqlite3")
    fresh = not db_path.exists()
    if fresh and template.exists():
        shutil.copyfile(template, db_path)
    call_command("migrate", verbosity=0, interactive=False)
    if fresh and not template.exists():
        try:
            tmp = template.with_name(f"{template.name}.{os.getpid()}.tmp")
            shutil.copyfile(db_path, tmp)
            tmp.replace(template)
        except OSError:
            pass  # read-only venv: just no cache


def write_json_atomically(path: Path, data):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", required=True, help="database, keys, ca.pem, ready.json")
    parser.add_argument("--http-port", type=int, default=0, help="0 = ephemeral (default)")
    parser.add_argument("--https-port", type=int, default=0, help="0 = ephemeral (default)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--watch-stdin", action="store_true",
                        help="exit when stdin reaches EOF (e.g. the parent test process died)")
    parser.add_argument("--verbose", action="store_true", help="log each request (path only)")
    args = parser.parse_args()

    state = Path(args.state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    ready_path = state / "ready.json"
    ready_path.unlink(missing_ok=True)

    from idp import httpserver, pki

    pki.ensure_signing_key(state)
    ca_cert, ca_key = pki.ensure_ca(state)
    cert_file, key_file = pki.issue_server_cert(state, ca_cert, ca_key)

    os.environ["IDP_STATE_DIR"] = str(state)
    os.environ["DJANGO_SETTINGS_MODULE"] = "idp.settings"
    import django
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    django.setup()
    migrate(state / "idp.sqlite3", call_command)
    seed()
    app = get_wsgi_application()

    servers = [
        httpserver.WSGIServer(args.host, args.http_port, app, verbose=args.verbose),
        httpserver.WSGIServer(args.host, args.https_port, app,
                              httpserver.tls_context(cert_file, key_file), verbose=args.verbose),
    ]
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
               for s in servers]
    for thread in threads:
        thread.start()

    http_url = "http://%s:%d" % (args.host, servers[0].server_address[1])
    https_url = "https://%s:%d" % (args.host, servers[1].server_address[1])
    ready = {
        "http": http_url,
        "https": https_url,
        "ca": str(state / "ca.pem"),
        # The issuer is derived from the request's scheme and Host header; these are
        # the values for clients that use the URLs above as they are.
        "issuer_http": http_url,
        "issuer_https": https_url,
        "pid": os.getpid(),
    }

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.watch_stdin:
        def watch():
            while os.read(0, 4096):  # raw fd: no buffered-reader lock at exit
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    write_json_atomically(ready_path, ready)
    print("IDP READY " + json.dumps(ready), flush=True)
    while not stop.wait(1.0):
        pass
    for server in servers:
        server.shutdown()
        server.server_close()
    ready_path.unlink(missing_ok=True)
    print("IDP STOPPED", flush=True)


if __name__ == "__main__":
    main()
