"""In-memory state behind the test-only /test/ endpoints.

Nothing here ever stores a token, code, secret or password: request records keep
only the endpoint, grant_type, client_id, status, OAuth error code and timings.
Plain Python (no Django imports) so settings.py can import it.
"""

import collections
import os
import threading
import time

_lock = threading.Lock()


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def _env_bool(name, default):
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    return value in ("1", "true", "yes", "on")


# Token/code lifetimes in seconds. Initial values come from the environment;
# POST /test/config changes them at run time (see views.test_config).
CONFIG = {
    "access_token_expire_seconds": _env_int("ACCESS_TOKEN_EXPIRE_SECONDS", 3600),
    # When > 0, the first access token issued lives this long instead (then 0): a sign-in's token that is soon due,
    # and renewals that are not, with no window between them in which a renewal could get the short lifetime.
    "first_access_token_expire_seconds": _env_int("FIRST_ACCESS_TOKEN_EXPIRE_SECONDS", 0),
    "id_token_expire_seconds": _env_int("ID_TOKEN_EXPIRE_SECONDS", 3600),
    # 0 = refresh tokens never expire by age. Otherwise DOT rejects a refresh token
    # this many seconds after the access token issued with it has expired.
    "refresh_token_expire_seconds": _env_int("REFRESH_TOKEN_EXPIRE_SECONDS", 0),
    "authorization_code_expire_seconds": _env_int("AUTHORIZATION_CODE_EXPIRE_SECONDS", 60),
    "device_code_expire_seconds": _env_int("DEVICE_CODE_EXPIRE_SECONDS", 600),
    "device_flow_interval": _env_int("DEVICE_FLOW_INTERVAL", 5),
    # When > 0, token answers carry "refresh_in" (Microsoft's hint to renew early; MSAL's refresh_on).
    "refresh_in_seconds": _env_int("REFRESH_IN_SECONDS", 0),
}
FLAGS = {
    "rotate_refresh_token": _env_bool("ROTATE_REFRESH_TOKEN", True),
    "refresh_token_reuse_protection": _env_bool("REFRESH_TOKEN_REUSE_PROTECTION", True),
    "refresh_token_grace_period_seconds": _env_int("REFRESH_TOKEN_GRACE_PERIOD_SECONDS", 0),
    "refresh_requires_offline_access": _env_bool("REFRESH_TOKEN_REQUIRES_OFFLINE_ACCESS", False),
}


def access_token_expires_in(request=None):
    """Passed to oauthlib as token_expires_in (called once per token), so changes apply to the next token."""
    with _lock:
        first = CONFIG["first_access_token_expire_seconds"]
        if first > 0:
            CONFIG["first_access_token_expire_seconds"] = 0
            return first
        return CONFIG["access_token_expire_seconds"]


# ---------------------------------------------------------------- request log
RECENT_MAX = 500
_stats = {}
_recent = collections.deque(maxlen=RECENT_MAX)
_seq = [0]


def reset_counters():
    with _lock:
        _stats.clear()
        _stats.update(total=0, by_grant_type={}, by_status={}, by_endpoint={})
        _recent.clear()


reset_counters()


def record(endpoint, grant_type, client_id, status, error, injected, delay_ms, duration_ms):
    with _lock:
        _seq[0] += 1
        by_endpoint = _stats["by_endpoint"]
        by_endpoint[endpoint] = by_endpoint.get(endpoint, 0) + 1
        if endpoint == "token":
            _stats["total"] += 1
            key = grant_type or "(none)"
            _stats["by_grant_type"][key] = _stats["by_grant_type"].get(key, 0) + 1
            _stats["by_status"][str(status)] = _stats["by_status"].get(str(status), 0) + 1
        _recent.append({
            "seq": _seq[0],
            "time": round(time.time(), 3),
            "endpoint": endpoint,
            "grant_type": grant_type,
            "client_id": client_id,
            "status": status,
            "error": error,
            "injected": injected,
            "delay_ms": delay_ms,
            "duration_ms": duration_ms,
        })


def snapshot(limit=100, endpoint=None):
    with _lock:
        recent = [r for r in _recent if endpoint is None or r["endpoint"] == endpoint]
        return {
            "total": _stats["total"],
            "by_grant_type": dict(_stats["by_grant_type"]),
            "by_status": dict(_stats["by_status"]),
            "by_endpoint": dict(_stats["by_endpoint"]),
            "recent": recent[-limit:] if limit > 0 else [],
        }


# ------------------------------------------------------- injected faults/delay
_faults = []  # dicts: status, remaining, endpoint, grant_type, error, retry_after
_delay = {"ms": 0, "remaining": None, "endpoint": "token"}


def add_fault(status, count, endpoint, grant_type, error, retry_after):
    with _lock:
        _faults.append({"status": status, "remaining": count, "endpoint": endpoint,
                        "grant_type": grant_type, "error": error, "retry_after": retry_after})


def set_delay(ms, count, endpoint):
    with _lock:
        _delay.update(ms=ms, remaining=count, endpoint=endpoint)


def reset_faults():
    with _lock:
        _faults.clear()
        _delay.update(ms=0, remaining=None, endpoint="token")


def faults_snapshot():
    with _lock:
        return {"fail_next": [dict(f) for f in _faults], "delay": dict(_delay)}


def _matches(rule_endpoint, rule_grant, endpoint, grant_type):
    return rule_endpoint in ("any", endpoint) and rule_grant in (None, grant_type)


def take_actions(endpoint, grant_type):
    """Returns (delay_ms, fault-or-None) for one incoming request, consuming counts."""
    with _lock:
        delay_ms = 0
        if _delay["ms"] > 0 and _matches(_delay["endpoint"], None, endpoint, grant_type):
            delay_ms = _delay["ms"]
            if _delay["remaining"] is not None:
                _delay["remaining"] -= 1
                if _delay["remaining"] <= 0:
                    _delay.update(ms=0, remaining=None)
        fault = None
        for rule in _faults:
            if _matches(rule["endpoint"], rule["grant_type"], endpoint, grant_type):
                rule["remaining"] -= 1
                fault = dict(rule)
                break
        _faults[:] = [r for r in _faults if r["remaining"] > 0]
        return delay_ms, fault


# ------------------------------------------------------ device-code poll memory
# key: sha256(device_code) -> {"interval": seconds, "last": monotonic or None}
_polls = {}


def device_issued(code_hash, interval):
    with _lock:
        _polls[code_hash] = {"interval": interval, "last": None}


def device_poll_too_fast(code_hash):
    """True when this poll came sooner than `interval` after the previous one.

    A quarter second of slack absorbs timer jitter; the RFC 8628 "+5 s after
    slow_down" rule is left to the client (the server does not raise the interval).
    """
    now = time.monotonic()
    with _lock:
        entry = _polls.get(code_hash)
        if entry is None:
            return False
        last, entry["last"] = entry["last"], now
        return last is not None and now - last < entry["interval"] - 0.25


def reset_device_polls():
    with _lock:
        _polls.clear()


# ------------------------------------------------------------- declined scopes
# Scopes the token endpoint leaves out of its answer's "scope", as an IdP that grants fewer scopes than asked
# does (RFC 6749 section 5.1). POST /test/decline-scope?scope=X adds one; /test/reset clears them.
DECLINED_SCOPES = set()
