#!/usr/bin/env python3
"""Writes the benchmark's MSAL unified-cache document, shaped as msal-python writes one (msal/token_cache.py).

    make_cache.py ACCOUNTS TOKENS_PER_ACCOUNT OUT.json
    make_cache.py ACCOUNTS TOKENS_PER_ACCOUNT OUT.json --varied-only   # only OUT.json.varied.jsonl, from OUT.json

Also writes OUT.json.meta.json: which entry the benchmark asks for (client, authority, scope, account and the
access token the answer must carry), so that bench.sh, brokerctl and the msal-python harness query the same one,
plus other accounts that the removal timing may remove.

And OUT.json.varied.jsonl, the requests of the benchmark's varied mode (one that no memo of the last request can
answer): 4,096 lines, each an (account, scope set) pair of the document drawn at random (seeded: an account among
all of them, then one of its access tokens' scope sets), never the same pair twice in a row (pairs may repeat
otherwise: 1 account has only 10). A line is the exact JSON-RPC line bench.sh's silent_request() writes for that
pair (the authority is the account's home tenant, the realm of its tokens), a TAB, and a substring its answer must
contain: "accessToken":" followed by the token's secret up to 64 characters past the JWT header (the header, 67
characters, is the same in every token of the document). It is derived from the document alone, so --varied-only
(bench.sh: a document made before this file existed) writes the same file as the full run.

Why it looks the way it does:
- keys, field names and string-typed timestamps exactly as msal-python writes them, so msal-python's O(1)
  access-token lookup (by key) applies and the comparison with it is fair;
- one client id for every token (the broker's worst case: one app's index holds everything), a few AppMetadata;
- each account's access tokens have disjoint scope sets, so exactly one token answers the benchmark's scope;
- secrets of realistic size (1.2-2 KB JWT-shaped access tokens), since the document size and the memory
  footprint are figures of the benchmark;
- accounts spread over tenants (100 users a tenant), realm = home tenant, as Entra work accounts are;
- a seeded random generator: the same arguments give the same document.
"""
import base64
import json
import os
import random
import sys
import time
import uuid

ENV = "login.microsoftonline.com"
CLIENT_ID = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"      # one public client for all tokens (the Azure CLI's id)
OTHER_CLIENTS = ["1950a258-227b-4e31-a9cf-717495945fc2", "d3590ed6-52b3-4102-aeff-aad2292ab01c",
                 "872cd9fa-d31f-45e0-9eab-6e460a02d1f1", "27922004-5251-4030-b22d-91ecd9a37ea4"]
BENCH_SCOPE = "https://graph.microsoft.com/User.Read"
# Scopes of an account's further access tokens, one each; past this list, per-API scopes are made up.
OTHER_SCOPES = ["https://management.azure.com/user_impersonation", "https://vault.azure.net/user_impersonation",
                "https://storage.azure.com/user_impersonation", "https://graph.microsoft.com/Mail.Read",
                "https://outlook.office.com/Calendars.Read", "https://database.windows.net/user_impersonation",
                "https://servicebus.azure.net/user_impersonation", "https://analysis.windows.net/powerbi/api/Dataset.Read.All",
                "https://api.spaces.skype.com/user_impersonation"]
VARIED_LINES = 4096


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def write_varied(doc, accounts, per_account, out):
    """OUT.json.varied.jsonl (see the docstring) from the document as written (or read back: the same order)."""
    by_account = {}
    for entry in doc["AccessToken"].values():
        if entry["client_id"] == CLIENT_ID:
            by_account.setdefault(entry["home_account_id"], []).append(entry)
    hids = list(by_account)
    if sum(len(v) for v in by_account.values()) < 2:
        sys.exit("make_cache.py: the varied requests need at least two access tokens")
    rng = random.Random(f"brokerd-bench-varied-{accounts}-{per_account}")
    lines, last = [], None
    while len(lines) < VARIED_LINES:
        entries = by_account[hids[rng.randrange(len(hids))]]
        entry = entries[rng.randrange(len(entries))]
        if entry is last:
            continue
        last = entry
        request = {"jsonrpc": "2.0", "id": 1, "method": "acquireTokenSilently",
                   "params": {"clientId": entry["client_id"], "authority": f"https://{entry['environment']}/{entry['realm']}",
                              "scopes": entry["target"].split(" "), "account": {"homeAccountId": entry["home_account_id"]}}}
        secret = entry["secret"]
        expected = '"accessToken":"' + secret[: secret.index(".") + 1 + 64]
        lines.append(json.dumps(request, separators=(",", ":")) + "\t" + expected + "\n")
    with open(out + ".varied.jsonl.tmp", "w") as f:
        f.writelines(lines)
    os.replace(out + ".varied.jsonl.tmp", out + ".varied.jsonl")


def main():
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] != "--varied-only"):
        sys.exit("usage: make_cache.py ACCOUNTS TOKENS_PER_ACCOUNT OUT.json [--varied-only]")
    accounts, per_account, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if accounts < 1 or per_account < 1:
        sys.exit("make_cache.py: ACCOUNTS and TOKENS_PER_ACCOUNT must be at least 1")
    if len(sys.argv) == 5:
        with open(out) as f:
            write_varied(json.load(f), accounts, per_account, out)
        return
    if os.path.exists(out + ".meta.json"):
        os.remove(out + ".meta.json")
    rng = random.Random(f"brokerd-bench-{accounts}-{per_account}")
    guid = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))
    now = int(time.time())
    tenants = [guid() for _ in range(max(1, accounts // 100))]
    scope_sets = [BENCH_SCOPE] + OTHER_SCOPES[: per_account - 1]
    scope_sets += [f"api://{guid()}/access_as_user" for _ in range(per_account - len(scope_sets))]
    at_header = b64url(json.dumps({"typ": "JWT", "alg": "RS256", "kid": "bench-key"}).encode())
    id_header = b64url(json.dumps({"typ": "JWT", "alg": "none"}).encode())

    doc = {"AccessToken": {}, "RefreshToken": {}, "IdToken": {}, "Account": {}, "AppMetadata": {}}
    at, rt, idt, acct = doc["AccessToken"], doc["RefreshToken"], doc["IdToken"], doc["Account"]
    target_index = accounts // 2          # not the first nor the last entry of anything
    meta = {"clientId": CLIENT_ID, "scope": BENCH_SCOPE, "accounts": accounts, "tokensPerAccount": per_account,
            "accessTokens": accounts * per_account, "removable": []}
    for i in range(accounts):
        uid, utid = guid(), tenants[i % len(tenants)]
        hid = f"{uid}.{utid}"
        username = f"user{i:05d}@tenant{i % len(tenants):03d}.example.com"
        claims = {"aud": CLIENT_ID, "iss": f"https://{ENV}/{utid}/v2.0", "iat": now, "nbf": now, "exp": now + 3600,
                  "name": f"Bench User {i}", "oid": uid, "preferred_username": username, "sub": b64url(rng.randbytes(32)),
                  "tid": utid, "ver": "2.0"}
        id_token = f"{id_header}.{b64url(json.dumps(claims).encode())}."
        for j, target in enumerate(scope_sets):
            size = rng.randint(1200, 2000)          # total length of the JWT-shaped secret
            body = b64url(rng.randbytes((size - len(at_header) - 344) * 3 // 4))
            secret = f"{at_header}.{body}.{b64url(rng.randbytes(256))}"
            key = "-".join([hid, ENV, "AccessToken", CLIENT_ID, utid, target]).lower()
            at[key] = {"credential_type": "AccessToken", "secret": secret, "home_account_id": hid,
                       "environment": ENV, "client_id": CLIENT_ID, "target": target, "realm": utid,
                       "token_type": "Bearer", "cached_at": str(now), "expires_on": str(now + 86400),
                       "extended_expires_on": str(now + 86400 + 3600)}
            if i == target_index and j == 0:
                meta.update(homeAccountId=hid, tenant=utid, authority=f"https://{ENV}/{utid}",
                            username=username, accessToken=secret)
        rt_target = " ".join(sorted([BENCH_SCOPE, "offline_access", "openid", "profile"]))
        rt["-".join([hid, ENV, "RefreshToken", CLIENT_ID, "", rt_target]).lower()] = {
            "credential_type": "RefreshToken", "secret": "1.A" + b64url(rng.randbytes(rng.randint(500, 800))),
            "home_account_id": hid, "environment": ENV, "client_id": CLIENT_ID, "target": rt_target,
            "last_modification_time": str(now)}
        idt["-".join([hid, ENV, "IdToken", CLIENT_ID, utid, ""]).lower()] = {
            "credential_type": "IdToken", "secret": id_token, "home_account_id": hid, "environment": ENV,
            "realm": utid, "client_id": CLIENT_ID}
        acct["-".join([hid, ENV, utid]).lower()] = {
            "home_account_id": hid, "environment": ENV, "realm": utid, "local_account_id": uid,
            "username": username, "authority_type": "MSSTS", "name": claims["name"],
            "client_info": b64url(json.dumps({"uid": uid, "utid": utid}).encode())}
        if i != target_index and len(meta["removable"]) < 64 and i % max(1, accounts // 64) == 0:
            meta["removable"].append(hid)
    for client in [CLIENT_ID] + OTHER_CLIENTS:
        doc["AppMetadata"][f"appmetadata-{ENV}-{client}"] = {"client_id": client, "environment": ENV}

    # The sidecar is written last: bench.sh remakes a document whose sidecar is missing (an interrupted run).
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=4)     # msal-python's serialize() indents by 4
    os.replace(out + ".tmp", out)
    write_varied(doc, accounts, per_account, out)
    with open(out + ".meta.json", "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
