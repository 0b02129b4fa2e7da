#!/usr/bin/env python3
"""brokerd sample app (Python): print how many mail folders the signed-in user has.

It shares its client registration (client id) with the Swift profile sample: once a user
signed in there (asking for user.read and consenting to mail.read as an extra scope), this
app gets its mail.read token from brokerd silently, out of the cache or by refresh.

    mail_count.py --client-id ID --authority URL [--api URL] [--account USERNAME]
                  [--flow deviceCode|browser] [--no-interactive] [--socket PATH] [--ca-file PEM]

Prints ``alice has 3 mail folders (Inbox 12, Archive 40, Sent 7)`` and then, on a line of
its own, ``token source: cache|refresh|interactive``. Exit codes: 0 ok, 3 brokerd is not
running, 4 interaction required (with --no-interactive), 1 anything else. Errors and
sign-in prompts go to stderr. The access token is never printed.
Standard library only, Python 3.9 or newer.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

try:
    import brokerd_client as bc
except ImportError:  # not pip-installed: use the copy in this repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    import brokerd_client as bc

SCOPES = ["mail.read"]
EXIT_OK, EXIT_ERROR, EXIT_NO_BROKER, EXIT_INTERACTION = 0, 1, 3, 4


class AppError(Exception):
    """A failure with its exit code; the message is for stderr."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: Optional[list] = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description="Print the signed-in user's mail folder count, "
                                     "with a token from brokerd.")
    parser.add_argument("--client-id", default=env("BROKERD_EXAMPLE_CLIENT_ID"),
                        help="OAuth client id, the same as the profile sample's "
                             "(env BROKERD_EXAMPLE_CLIENT_ID)")
    parser.add_argument("--authority", default=env("BROKERD_EXAMPLE_AUTHORITY"),
                        help="authority URL (env BROKERD_EXAMPLE_AUTHORITY; default: brokerd's "
                             "default_authority)")
    parser.add_argument("--api", default=env("BROKERD_EXAMPLE_API"),
                        help="base URL of the mail API (env BROKERD_EXAMPLE_API; default: the authority)")
    parser.add_argument("--account", metavar="USERNAME",
                        help="the account to use (default: the first account brokerd knows for this client)")
    parser.add_argument("--flow", choices=["deviceCode", "browser"], default="deviceCode",
                        help="interactive sign-in flow, when one is needed (default: deviceCode)")
    parser.add_argument("--no-interactive", action="store_true",
                        help="never sign in interactively: exit 4 when that would be needed")
    parser.add_argument("--socket", help="brokerd's socket (default: $BROKERD_SOCKET, else the per-user one)")
    parser.add_argument("--ca-file", default=env("BROKERD_EXAMPLE_CA_FILE"),
                        help="PEM file of CAs to trust for an https API (env BROKERD_EXAMPLE_CA_FILE)")
    args = parser.parse_args(argv)
    if not args.client_id:
        parser.error("--client-id (or BROKERD_EXAMPLE_CLIENT_ID) is required")
    return args


def pick_account(app: bc.PublicClientApplication, username: Optional[str]) -> Optional[Dict[str, Any]]:
    """The account to use, or None when brokerd has none for this client (sign-in needed)."""
    if username:
        return app.get_account(username=username)
    accounts = app.get_accounts()
    return accounts[0] if accounts else None


def acquire_token(app: bc.PublicClientApplication, args: argparse.Namespace,
                  account: Optional[Dict[str, Any]] = None, force_refresh: bool = False) -> Dict[str, Any]:
    """Silent first; interactive only when brokerd says only that can help."""
    account = account or pick_account(app, args.account)
    if account is not None:
        try:
            return app.acquire_token_silent(SCOPES, account, force_refresh=force_refresh)
        except bc.InteractionRequired as error:
            name = account.get("username") or args.account
            why = f"brokerd cannot get a token for {name} silently ({error.message})"
    else:
        who = f"account {args.account!r}" if args.account else "account"
        why = f"brokerd has no {who} for client {args.client_id}"
    if args.no_interactive:
        raise AppError(f"interaction required: {why}. Sign in first (run without --no-interactive, "
                       "or sign in with the profile sample).", EXIT_INTERACTION)
    print(f"{why}; signing in.", file=sys.stderr, flush=True)
    hint = (account or {}).get("username") or args.account
    return app.acquire_token_interactive(SCOPES, flow=args.flow, login_hint=hint or None)


def get_json(url: str, token: str, ca_file: Optional[str]) -> Tuple[int, Dict[str, Any]]:
    """GET with the bearer token; (status, JSON body). Only the API's error fields are reported."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}",
                                                   "Accept": "application/json"})
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        try:
            body = json.loads(error.read() or b"{}")
        except ValueError:
            body = {}
        return error.code, body if isinstance(body, dict) else {}
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise AppError(f"cannot GET {url}: {getattr(error, 'reason', error)}") from None


def run(args: argparse.Namespace) -> int:
    app = bc.PublicClientApplication(args.client_id, authority=args.authority, socket_path=args.socket)
    result = acquire_token(app, args)
    api = (args.api or args.authority or result.get("authority") or "").rstrip("/")
    url = api + "/api/mailfolders"
    status, body = get_json(url, result["accessToken"], args.ca_file)
    if status == 401:
        # The API no longer takes the token (revoked or expired early): one forced refresh, like MSAL apps do.
        result = acquire_token(app, args, account=result["account"], force_refresh=True)
        status, body = get_json(url, result["accessToken"], args.ca_file)
    if status != 200:
        detail = body.get("error_description") or body.get("error") or "no details"
        raise AppError(f"GET {url} answered HTTP {status}: {detail}")
    folders = body.get("folders") or []
    user = body.get("username") or result["account"].get("username") or "the user"
    summary = ", ".join(f"{f.get('name')} {f.get('messages')}" for f in folders)
    count = body.get("count", len(folders))
    print(f"{user} has {count} mail folder{'' if count == 1 else 's'} ({summary})")
    print(f"token source: {result.get('source')}")
    return EXIT_OK


def main(argv: Optional[list] = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except AppError as error:
        print(f"mail_count: {error}", file=sys.stderr)
        return error.code
    except bc.BrokerNotRunning as error:
        print(f"mail_count: {error}", file=sys.stderr)
        return EXIT_NO_BROKER
    except bc.ServerDeclinedScopes as error:
        print(f"mail_count: the identity provider declined {' '.join(error.declined_scopes)} "
              f"(granted: {' '.join(error.granted_scopes) or 'nothing'})", file=sys.stderr)
        return EXIT_ERROR
    except bc.UserCanceled as error:
        print(f"mail_count: sign-in canceled: {error.message}", file=sys.stderr)
        return EXIT_ERROR
    except bc.BrokerError as error:
        print(f"mail_count: brokerd: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # the client has already canceled a running sign-in
        print("mail_count: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
