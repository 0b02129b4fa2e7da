#!/usr/bin/env python3
"""An app of msal-python with the broker on (enable_broker_on_linux=True), unmodified msal + pymsalruntime from PyPI,
run by DBusFrontEndTests against brokerd's com.microsoft.identity.broker1 front end.

    msal_app.py ENTRA_HTTP CLIENT_ID STEP...

msal-python's own HTTP (instance and OIDC discovery of login.microsoftonline.com) goes to our Entra emulator through
its `http_client=`; token requests go through pymsalruntime and D-Bus to brokerd. Steps, run in order in one app:
    interactive|SCOPE[|LOGIN_HINT]   acquire_token_interactive (console window handle)
    silent|SCOPE                     acquire_token_silent_with_error for the first account
    claims|SCOPE|CLAIMS_JSON         the same with a claims challenge (msal then skips its own cache)
    accounts                         get_accounts
    remove                           remove_account (the first account)
    broker                           whether msal-python kept the broker on (it turns it off when none answers)
Prints one JSON line: a report per step. Tokens are never printed: only whether there is one and its SHA-256.
"""
import hashlib
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

import msal


class Response:
    def __init__(self, status, text, headers):
        self.status_code, self.text, self.headers = status, text, headers

    def raise_for_status(self):
        if self.status_code >= 400:
            raise RuntimeError("HTTP %d" % self.status_code)


class EntraForwarder:
    """msal's http_client: each request to a Microsoft host goes to the emulator, which answers for that host."""

    def __init__(self, base):
        self.base = base.rstrip("/")

    def _send(self, method, url, params=None, data=None, headers=None):
        parts = urllib.parse.urlsplit(url)
        query = "&".join(q for q in (parts.query, urllib.parse.urlencode(params or {})) if q)
        target = self.base + parts.path + ("?" + query if query else "")
        body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
        request = urllib.request.Request(target, data=body, method=method,
                                         headers=dict(headers or {}, Host=parts.netloc))
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                status, text, got = answer.status, answer.read().decode(), dict(answer.headers)
        except urllib.error.HTTPError as error:
            status, text, got = error.code, error.read().decode(), dict(error.headers)
        return Response(status, text.replace("http://" + parts.netloc, "https://" + parts.netloc), got)

    def get(self, url, params=None, headers=None, **kwargs):
        return self._send("GET", url, params=params, headers=headers)

    def post(self, url, params=None, data=None, headers=None, **kwargs):
        return self._send("POST", url, params=params, data=data, headers=headers)

    def close(self):
        pass


def summary(result):
    if result is None:
        return {"result": None}
    out = {k: result.get(k) for k in ("token_source", "error", "error_description") if result.get(k) is not None}
    if result.get("access_token"):
        out["access_token_sha256"] = hashlib.sha256(result["access_token"].encode()).hexdigest()
    if result.get("id_token_claims"):
        out["preferred_username"] = result["id_token_claims"].get("preferred_username")
    return out


def main():
    entra, client_id, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    app = msal.PublicClientApplication(client_id, authority="https://login.microsoftonline.com/common",
                                       enable_broker_on_linux=True, http_client=EntraForwarder(entra))
    report = []
    for step in steps:
        kind, _, rest = step.partition("|")
        if kind == "interactive":
            scope, _, hint = rest.partition("|")
            result = app.acquire_token_interactive([scope], parent_window_handle=app.CONSOLE_WINDOW_HANDLE,
                                                   login_hint=hint or None)
            report.append(dict(summary(result), step=step))
        elif kind == "silent":
            accounts = app.get_accounts()
            result = app.acquire_token_silent_with_error([rest], account=accounts[0]) if accounts else None
            report.append(dict(summary(result), step=step))
        elif kind == "claims":
            scope, _, claims = rest.partition("|")
            accounts = app.get_accounts()
            result = (app.acquire_token_silent_with_error([scope], account=accounts[0], claims_challenge=claims)
                      if accounts else None)
            report.append(dict(summary(result), step=step))
        elif kind == "accounts":
            report.append({"step": step, "usernames": [a.get("username") for a in app.get_accounts()]})
        elif kind == "broker":
            report.append({"step": step, "enabled": bool(getattr(app, "_enable_broker", False))})
        elif kind == "remove":
            for account in app.get_accounts()[:1]:
                app.remove_account(account)
            report.append({"step": step})
        else:
            sys.exit("msal_app.py: unknown step " + step)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
