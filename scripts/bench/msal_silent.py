#!/usr/bin/env python3
"""msal-python's own silent path, timed the way brokerd's is: the comparison row of scripts/bench.sh.

    msal_silent.py CACHE.json META.json [--count N] [--warmup N]   # in-process loop, prints one key=value line
    msal_silent.py CACHE.json META.json --once                     # one call, for timing a whole process
    msal_silent.py CACHE.json META.json --rounds-on-stdin [--count N] [--warmup N]
        # loads once, then one timed loop (one key=value line) for each line read on stdin: bench.sh alternates
        # these rounds with brokerd's, so that both sides are measured under the same conditions
    msal_silent.py CACHE.json META.json --varied LINES.jsonl [--count N] [--warmup N] [--rounds-on-stdin]
        # the varied mode: each call asks for the (account, scopes) of the next line of LINES.jsonl (make_cache.py's
        # OUT.json.varied.jsonl, whose lines are already in a random order; the loop cycles through them and a round
        # goes on where the last one stopped), as the load client's --requests does with brokerd

In the varied mode the accounts are mapped up front, outside the timing (homeAccountId → the account object of
app.get_accounts()), and, since acquire_token_silent looks up the tokens of its app's authority's tenant (it has no
authority of its own), there is one PublicClientApplication for each authority of the lines, all sharing the one
token cache and HTTP client: what an app using several tenants does. Each timed call's access token must start with
the line's expected prefix and come from the cache, and no HTTP call may be made, as in the repeated mode.

The cache document and META (from make_cache.py) are the ones brokerd serves, so both answer for the same entry.
The app gets an in-memory HTTP client that answers only instance discovery and the authority's OpenID
configuration and raises on anything else: a silent call that went to the network (or took an error path) would
not be a cache hit, so every timed call's access token is compared with the expected one, and the fake's call
count during the timed loop must be 0. Either failure is reported and makes the exit status 1.
"""
import argparse
import json
import sys
import time

HOST = "login.microsoftonline.com"


class FakeResponse:
    def __init__(self, body):
        self.status_code, self.text, self.headers = 200, json.dumps(body), {"Content-Type": "application/json"}

    def raise_for_status(self):
        pass


class FakeHttpClient:
    """Answers from memory what msal-python fetches before it can look in its cache; refuses everything else."""

    def __init__(self, tenants):
        """`tenants`: one tenant (a string, as Tests/interop/msal_reads_export.py passes it) or several."""
        self.calls = 0
        if isinstance(tenants, str):
            tenants = [tenants]
        self.oidc = {}  # the OpenID configuration of each tenant, by its URL
        for tenant in tenants:
            base = f"https://{HOST}/{tenant}"
            self.oidc[f"{base}/v2.0/.well-known/openid-configuration"] = {
                "issuer": f"{base}/v2.0", "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
                "end_session_endpoint": f"{base}/oauth2/v2.0/logout",
                "jwks_uri": f"https://{HOST}/{tenant}/discovery/v2.0/keys",
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                "scopes_supported": ["openid", "profile", "email", "offline_access"]}
        self.oidc_url = next(iter(self.oidc))  # the first tenant's: instance discovery names it
        self.instance = {"tenant_discovery_endpoint": self.oidc_url, "api-version": "1.1",
                         "metadata": [{"preferred_network": HOST, "preferred_cache": "login.windows.net",
                                       "aliases": [HOST, "login.windows.net", "login.microsoft.com",
                                                   "sts.windows.net"]}]}

    def get(self, url, params=None, headers=None, **kwargs):
        self.calls += 1
        if url.startswith(f"https://{HOST}/common/discovery/instance"):
            return FakeResponse(self.instance)
        if url in self.oidc:
            return FakeResponse(self.oidc[url])
        raise RuntimeError(f"msal_silent.py: unexpected HTTP GET {url}")

    def post(self, url, params=None, data=None, headers=None, **kwargs):
        self.calls += 1
        raise RuntimeError(f"msal_silent.py: unexpected HTTP POST {url}")

    def close(self):
        pass


def percentile(sorted_values, p):  # nearest rank, as load_client.c
    return sorted_values[max(1, int(p * len(sorted_values) + 0.999999)) - 1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("meta")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--rounds-on-stdin", action="store_true")
    parser.add_argument("--varied", metavar="LINES.jsonl")
    args = parser.parse_args()
    if args.varied and args.once:
        parser.error("--varied and --once are exclusive")
    varied = []  # (authority, scopes, homeAccountId, expected token prefix) of each line
    if args.varied:
        with open(args.varied) as f:
            for line in f:
                if not line.strip():
                    continue
                request, _, expected = line.rstrip("\n").partition("\t")
                params = json.loads(request)["params"]
                prefix = expected[len('"accessToken":"'):] if expected.startswith('"accessToken":"') else ""
                varied.append((params["authority"], params["scopes"], params["account"]["homeAccountId"], prefix))
        if not varied:
            sys.exit(f"msal_silent.py: no request lines in {args.varied}")

    started = time.perf_counter()
    import msal  # inside the timing of --once on purpose: a process that wants a token pays for it
    with open(args.meta) as f:
        meta = json.load(f)
    cache = msal.SerializableTokenCache()
    with open(args.cache) as f:
        cache.deserialize(f.read())
    authorities = list(dict.fromkeys([meta["authority"]] + [authority for authority, _, _, _ in varied]))
    http = FakeHttpClient([authority.rsplit("/", 1)[1] for authority in authorities])
    app = msal.PublicClientApplication(meta["clientId"], authority=meta["authority"], token_cache=cache,
                                       http_client=http)
    if varied:
        apps = {meta["authority"]: app}
        for authority in authorities[1:]:
            apps[authority] = msal.PublicClientApplication(meta["clientId"], authority=authority, token_cache=cache,
                                                           http_client=http)
        by_id = {account["home_account_id"]: account for account in app.get_accounts()}
        missing = {hid for _, _, hid, _ in varied} - by_id.keys()
        if missing:
            sys.exit(f"msal_silent.py: get_accounts did not find {len(missing)} accounts of {args.varied}")
        calls = [(apps[authority], scopes, by_id[hid], prefix) for authority, scopes, hid, prefix in varied]
        loaded = time.perf_counter() - started
        if not args.rounds_on_stdin:
            return varied_loop(http, calls, 0, args.warmup, args.count, loaded)[0]
        status, position = 0, 0
        for _ in sys.stdin:
            round_status, position = varied_loop(http, calls, position, args.warmup, args.count, loaded)
            status |= round_status
            sys.stdout.flush()
        return status
    accounts = app.get_accounts(username=meta["username"])
    if len(accounts) != 1 or accounts[0]["home_account_id"] != meta["homeAccountId"]:
        sys.exit(f"msal_silent.py: get_accounts found {len(accounts)} accounts for {meta['username']}")
    account, scopes, expected = accounts[0], [meta["scope"]], meta["accessToken"]
    loaded = time.perf_counter() - started

    if args.once:
        result = app.acquire_token_silent(scopes, account)
        ok = bool(result) and result.get("access_token") == expected
        print("ok" if ok else f"msal_silent.py: not the cached token: {str(result)[:300]}")
        return 0 if ok else 1

    if not args.rounds_on_stdin:
        return timed_loop(app, http, scopes, account, expected, args.warmup, args.count, loaded)
    status = 0
    for _ in sys.stdin:
        status |= timed_loop(app, http, scopes, account, expected, args.warmup, args.count, loaded)
        sys.stdout.flush()
    return status


def timed_loop(app, http, scopes, account, expected, warmup, count, loaded):
    """warmup + count calls; prints the figures of the last count as one line. 1 on any wrong answer or HTTP call."""
    errors, first_error, latencies = 0, None, []
    for i in range(warmup + count):
        if i == warmup:
            calls_before = http.calls
        t0 = time.perf_counter_ns()
        result = app.acquire_token_silent(scopes, account)
        t1 = time.perf_counter_ns()
        if not result or result.get("access_token") != expected or result.get("token_source") != "cache":
            errors += 1
            first_error = first_error or str(result)[:300]
        if i >= warmup:
            latencies.append(t1 - t0)
    return report(http, calls_before, errors, first_error, latencies, loaded)


def varied_loop(http, calls, position, warmup, count, loaded):
    """timed_loop's varied mode: call i asks for calls[(position + i) % len(calls)]. → (status, next position)"""
    errors, first_error, latencies, n = 0, None, [], len(calls)
    for i in range(warmup + count):
        if i == warmup:
            calls_before = http.calls
        app, scopes, account, prefix = calls[(position + i) % n]
        t0 = time.perf_counter_ns()
        result = app.acquire_token_silent(scopes, account)
        t1 = time.perf_counter_ns()
        if not result or not result.get("access_token", "").startswith(prefix) or result.get("token_source") != "cache":
            errors += 1
            first_error = first_error or f"line {(position + i) % n + 1}: {str(result)[:300]}"
        if i >= warmup:
            latencies.append(t1 - t0)
    return report(http, calls_before, errors, first_error, latencies, loaded), (position + warmup + count) % n


def report(http, calls_before, errors, first_error, latencies, loaded):
    """Prints a loop's key=value line; 1 on any wrong answer or HTTP call during the timed calls."""
    import msal
    timed_calls = http.calls - calls_before
    latencies.sort()
    if first_error:
        print(f"msal_silent.py: unexpected result: {first_error}", file=sys.stderr)
    if timed_calls:
        print(f"msal_silent.py: {timed_calls} HTTP calls during the timed loop", file=sys.stderr)
    print(f"version={msal.__version__} requests={len(latencies)} errors={errors} http_calls={timed_calls} "
          f"p50_us={percentile(latencies, 0.5) / 1000:.1f} p99_us={percentile(latencies, 0.99) / 1000:.1f} "
          f"mean_us={sum(latencies) / len(latencies) / 1000:.1f} load_s={loaded:.2f}")
    return 1 if errors or timed_calls else 0

if __name__ == "__main__":
    sys.exit(main())
