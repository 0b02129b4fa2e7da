"""Request accounting, fault injection and serialisation (test-only behaviour)."""

import base64
import json
import threading
import time
from urllib.parse import unquote_plus

from django.http import JsonResponse

from idp import control

# Paths of the endpoints whose traffic /test/requests reports and /test/fail-next,
# /test/delay can target.
RECORDED = {
    "/token/": "token",
    "/revoke_token/": "revoke",
    "/device-authorization/": "device_authorization",
}

_django_lock = threading.RLock()


def _client_id(request):
    client_id = request.POST.get("client_id")
    auth = request.META.get("HTTP_AUTHORIZATION", "")
    if not client_id and auth.lower().startswith("basic "):
        try:
            client_id = unquote_plus(base64.b64decode(auth[6:]).decode().split(":", 1)[0])
        except (ValueError, UnicodeDecodeError):
            client_id = None
    return client_id or None


def _oauth_error(response):
    if response.status_code < 400:
        return None
    try:
        return json.loads(response.content).get("error")
    except (ValueError, AttributeError):
        return None


def _rewritten_token_answer(response):
    """Declined scopes left out of "scope"; "refresh_in" added when configured."""
    body = json.loads(response.content)
    if control.DECLINED_SCOPES:
        granted = [s for s in body.get("scope", "").split() if s not in control.DECLINED_SCOPES]
        body["scope"] = " ".join(granted)
    if control.CONFIG["refresh_in_seconds"] > 0:
        body["refresh_in"] = control.CONFIG["refresh_in_seconds"]
    rewritten = JsonResponse(body, status=response.status_code)
    rewritten["Cache-Control"] = "no-store"
    return rewritten


class TestControlMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        endpoint = RECORDED.get(request.path)
        if endpoint is None or request.method != "POST":
            return self.get_response(request)
        started = time.monotonic()
        grant_type = request.POST.get("grant_type") if endpoint == "token" else None
        delay_ms, fault = control.take_actions(endpoint, grant_type)
        if delay_ms:
            time.sleep(delay_ms / 1000.0)  # outside the Django lock: others proceed
        if fault:
            response = JsonResponse(
                {"error": fault["error"],
                 "error_description": "injected by the test IdP (/test/fail-next)"},
                status=fault["status"])
            response["Cache-Control"] = "no-store"
            if fault["retry_after"] is not None:
                response["Retry-After"] = str(fault["retry_after"])
        else:
            response = self.get_response(request)
            if endpoint == "token" and response.status_code == 200 and (
                    control.DECLINED_SCOPES or control.CONFIG["refresh_in_seconds"] > 0):
                response = _rewritten_token_answer(response)
        control.record(endpoint, grant_type, _client_id(request), response.status_code,
                       _oauth_error(response), fault is not None, delay_ms,
                       int((time.monotonic() - started) * 1000))
        return response


class SerializeMiddleware:
    """Runs the rest of Django one request at a time: sqlite plus rotating refresh
    tokens under concurrent requests would otherwise hit "database is locked"."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with _django_lock:
            return self.get_response(request)
