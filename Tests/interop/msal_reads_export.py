#!/usr/bin/env python3
"""Does the real msal-python read what brokerd exports? Used by ExportReadabilityTests.

    msal_reads_export.py make INPUT.json          # a document with one valid account and entries no SDK can read
    msal_reads_export.py check EXPORT.json        # msal-python loads it and runs what an app runs over the cache

`check` deserializes the export into msal's SerializableTokenCache, scans every section (msal does
int(entry["expires_on"]) on every access token it scans), lists the accounts through a PublicClientApplication
(authority_type and username of every account), and asks for a forced silent refresh of each (the refresh tokens
are sorted by int(last_modification_time) first). The HTTP client answers discovery from memory and refuses the
refresh with invalid_grant, so no network is used. Any exception is a failure (exit status 1, traceback on stderr).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench"))
from msal_silent import FakeHttpClient, FakeResponse  # noqa: E402  (the bench's in-memory discovery)

CLIENT = "11111111-aaaa-bbbb-cccc-000000000001"
TENANT = "45e7056b-35bc-4981-bbe8-21b9fc0b4ac1"
HOME = "ed0db124-d3aa-46a3-be65-6e36b09668b0." + TENANT
ENV = "login.microsoftonline.com"
SCOPE = "https://graph.microsoft.com/User.Read"

# Keys of the entries that an SDK cannot read in their section; brokerd must keep them, elsewhere.
UNREADABLE = {
    "AccessToken": ["placeholder", "not-an-object", "expires-soon", "numeric-target", "no-secret"],
    "RefreshToken": ["modified-yesterday"],
    "Account": ["no-username"],
}


def make(path):
    base = {"home_account_id": HOME, "environment": ENV, "client_id": CLIENT}
    document = {
        "AccessToken": {
            "valid-at": dict(base, credential_type="AccessToken", secret="fake-at-valid", realm=TENANT, target=SCOPE,
                             cached_at="1700000000", expires_on="4000000000", extended_expires_on="4000000000"),
            "placeholder": {"foo": "bar"},
            "not-an-object": "kept as it is",
            "expires-soon": dict(base, credential_type="AccessToken", secret="fake-at-soon", realm=TENANT,
                                 target="other", expires_on="soon"),
            "numeric-target": dict(base, credential_type="AccessToken", secret="fake-at-num", realm=TENANT,
                                   target=5, expires_on="4000000000"),
            "no-secret": dict(base, credential_type="AccessToken", realm=TENANT, target="s"),
        },
        "RefreshToken": {
            "valid-rt": dict(base, credential_type="RefreshToken", secret="fake-rt-valid", target=SCOPE,
                             last_modification_time="1700000000"),
            "modified-yesterday": dict(base, credential_type="RefreshToken", secret="fake-rt-odd", target=SCOPE,
                                       client_id="other-client", last_modification_time="yesterday"),
        },
        "IdToken": {},
        "Account": {
            "valid-account": dict(home_account_id=HOME, environment=ENV, realm=TENANT, local_account_id="oid",
                                  username="user@example.com", authority_type="MSSTS"),
            "no-username": dict(home_account_id="x." + TENANT, environment=ENV, realm=TENANT, authority_type="MSSTS"),
        },
        "AppMetadata": {"appmetadata-%s-%s" % (ENV, CLIENT): {"client_id": CLIENT, "environment": ENV}},
    }
    with open(path, "w") as f:
        json.dump(document, f, indent=4)


class RefusingHttpClient(FakeHttpClient):
    def post(self, url, params=None, data=None, headers=None, **kwargs):
        self.calls += 1
        response = FakeResponse({"error": "invalid_grant", "error_description": "refused by the test"})
        response.status_code = 400
        return response


def check(path):
    import msal
    cache = msal.SerializableTokenCache()
    with open(path) as f:
        cache.deserialize(f.read())
    scanned = {}
    for kind in ("AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"):
        scanned[kind] = len(list(cache.search(kind)))
    app = msal.PublicClientApplication(CLIENT, authority="https://%s/%s" % (ENV, TENANT), token_cache=cache,
                                       http_client=RefusingHttpClient(TENANT))
    accounts = app.get_accounts()
    refreshes = [app.acquire_token_silent_with_error([SCOPE], account=account, force_refresh=True)
                 for account in accounts]
    print(json.dumps({"scanned": scanned, "accounts": [a["username"] for a in accounts],
                      "refresh_errors": [(r or {}).get("error") for r in refreshes]}))


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
