"""Our views: DOT subclasses (discovery, token, device authorization), a login page,
a small protected resource API (/api/me, /api/mailfolders), and the TEST-ONLY control
endpoints under /test/."""

import hashlib
import json
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.views import LoginView
from django.http import JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from oauth2_provider import views as dot
from oauth2_provider.models import (
    get_application_model, get_device_grant_model, get_refresh_token_model)
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.www_authenticate import build_bearer_challenge, challenge_status

from idp import control
from idp.validators import subject_for

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _sha256(value):
    return hashlib.sha256(value.encode()).hexdigest()


def _url(request, name, **kwargs):
    return request.build_absolute_uri(reverse(name, kwargs=kwargs))


def _json(response):
    return json.loads(response.content)


def _add_metadata(request, data):
    """What stock DOT leaves out of its discovery documents."""
    data["device_authorization_endpoint"] = _url(request, "oauth2_provider:device-authorization")
    data["revocation_endpoint"] = _url(request, "oauth2_provider:revoke-token")
    data["revocation_endpoint_auth_methods_supported"] = ["none"]
    data["grant_types_supported"] = list(oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED)
    data["code_challenge_methods_supported"] = ["S256"]
    data["response_types_supported"] = ["code"]
    data["response_modes_supported"] = ["query"]
    if "id_token_signing_alg_values_supported" in data:
        data["id_token_signing_alg_values_supported"] = ["RS256"]
    return data


class DiscoveryView(dot.ConnectDiscoveryInfoView):
    def get(self, request, *args, **kwargs):
        response = JsonResponse(_add_metadata(request, _json(super().get(request, *args, **kwargs))))
        response["Access-Control-Allow-Origin"] = "*"
        return response


class ServerMetadataView(dot.OAuthServerMetadataView):
    def get(self, request, *args, **kwargs):
        return JsonResponse(_add_metadata(request, _json(super().get(request, *args, **kwargs))))


class DeviceAuthorizationView(dot.DeviceAuthorizationView):
    """Makes the verification URIs name the listener that was asked, and applies the
    configured device-code lifetime and polling interval."""

    def post(self, request, *args, **kwargs):
        client_id = request.POST.get("client_id", "")
        if not get_application_model().objects.filter(client_id=client_id).exists():
            return JsonResponse({"error": "invalid_client"}, status=401)  # DOT: invalid_request
        unknown = set(request.POST.get("scope", "").split()) - set(oauth2_settings.SCOPES)
        if unknown:  # DOT does not check scopes here
            return JsonResponse({"error": "invalid_scope",
                                 "error_description": "unknown scope " + " ".join(sorted(unknown))},
                                status=400)
        response = super().post(request, *args, **kwargs)
        if response.status_code != 200:
            return response
        data = _json(response)
        lifetime = control.CONFIG["device_code_expire_seconds"]
        interval = control.CONFIG["device_flow_interval"]
        verify = _url(request, "oauth2_provider:device")
        data.update(verification_uri=verify, expires_in=lifetime, interval=interval,
                    verification_uri_complete=f"{verify}?user_code={data['user_code']}")
        get_device_grant_model().objects.filter(device_code=data["device_code"]).update(
            expires=timezone.now() + timedelta(seconds=lifetime), interval=interval)
        control.device_issued(_sha256(data["device_code"]), interval)
        return JsonResponse(data, headers={"Cache-Control": "no-store"})


class TokenView(dot.TokenView):
    """DOT's token endpoint plus: RFC 8628 slow_down, single-use device codes, and
    (opt-in) refresh tokens only for scope offline_access."""

    def post(self, request, *args, **kwargs):
        device_code = request.POST.get("device_code") if (
            request.POST.get("grant_type") == DEVICE_GRANT) else None
        if device_code and control.device_poll_too_fast(_sha256(device_code)):
            return JsonResponse({"error": "slow_down"}, status=400,
                                headers={"Cache-Control": "no-store"})
        response = super().post(request, *args, **kwargs)
        if device_code and response.status_code == 404:  # DOT's "device_not_found"
            return JsonResponse({"error": "invalid_grant",
                                 "error_description": "unknown device_code"}, status=400)
        if response.status_code != 200:
            return response
        if device_code:  # stock DOT would mint fresh tokens on every later poll
            model = get_device_grant_model()
            model.objects.filter(device_code=device_code).update(status=model.EXPIRED)
        data = _json(response)
        if (control.FLAGS["refresh_requires_offline_access"] and "refresh_token" in data
                and "offline_access" not in data.get("scope", "").split()):
            get_refresh_token_model().objects.filter(
                token_checksum=_sha256(data.pop("refresh_token"))).delete()
            response.content = json.dumps(data).encode()
            response["Content-Length"] = str(len(response.content))
        return response


@method_decorator(csrf_exempt, name="dispatch")  # for CsrfViewMiddleware
class TestLoginView(LoginView):
    """Django's login form without CSRF enforcement (test fixture): a scripted client
    needs neither the csrf token nor, on https, a Referer header. Sending the token
    anyway is harmless."""

    template_name = "registration/login.html"

    def dispatch(self, request, *args, **kwargs):
        request._dont_enforce_csrf_checks = True  # LoginView applies csrf_protect itself
        return super().dispatch(request, *args, **kwargs)


def index(request):
    user = request.user if request.user.is_authenticated else None
    return JsonResponse({
        "service": "brokerd test IdP (test-only)",
        "user": user.get_username() if user else None,
        "discovery": request.build_absolute_uri("/.well-known/openid-configuration"),
    })


class _ResourceView(dot.ScopedProtectedResourceView):
    """Base of the fake resource API (/api/...): DOT validates the bearer token and
    checks `required_scopes`, exactly as a real resource server built on DOT would.
    A missing, unknown, revoked or expired token answers 401, a valid token without
    the scope 403 `insufficient_scope` (RFC 6750 §3.1). DOT's own default for both is
    a bare 403, which would not let a client tell "sign in again" from "ask for
    consent", so the answer is built here with DOT's RFC 6750 helpers instead."""

    def verify_request(self, request):
        valid, oauthlib_request = super().verify_request(request)
        if valid:  # DOT's validator put the AccessToken row there; keep it for get()
            request.access_token = oauthlib_request.access_token
        return valid, oauthlib_request

    def unauthenticated_response(self, request, oauthlib_request=None):
        error = dict(getattr(oauthlib_request, "oauth2_error", None) or {})
        if error.get("error") == "insufficient_scope":
            error["scope"] = " ".join(self.required_scopes)  # RFC 6750 §3: the scope that would do
        # No error attribute in the challenge when no token came at all (RFC 6750 §3.1).
        challenge = build_bearer_challenge(request, oauth2_error=error or None, resource_metadata_url=None)
        body = {"error": error.get("error", "invalid_token")}
        if error.get("error_description"):
            body["error_description"] = str(error["error_description"])
        if "scope" in error:
            body["scope"] = error["scope"]
        return JsonResponse(body, status=challenge_status(error),
                            headers={"WWW-Authenticate": challenge, "Cache-Control": "no-store"})


class MeView(_ResourceView):
    """GET /api/me (scope user.read): who the token is for."""

    required_scopes = ["user.read"]

    def get(self, request, *args, **kwargs):
        token = request.access_token
        return JsonResponse({
            "sub": subject_for(token.user),
            "username": token.user.get_username(),
            "name": token.user.get_full_name(),
            "email": token.user.email,
            "client_id": token.application.client_id,
            "scope": token.scope,
            "expires_at": int(token.expires.timestamp()),
        })


# Fixed mail folders per user (name, message count): the fake data /api/mailfolders serves.
MAIL_FOLDERS = {
    "alice": [("Inbox", 12), ("Archive", 40), ("Sent", 7)],
    "bob": [("Inbox", 3), ("Archive", 0), ("Sent", 1)],
}
DEFAULT_MAIL_FOLDERS = [("Inbox", 0), ("Archive", 0), ("Sent", 0)]


class MailFoldersView(_ResourceView):
    """GET /api/mailfolders (scope mail.read): the token user's fixed folder list."""

    required_scopes = ["mail.read"]

    def get(self, request, *args, **kwargs):
        username = request.access_token.user.get_username()
        folders = [{"name": name, "messages": count}
                   for name, count in MAIL_FOLDERS.get(username, DEFAULT_MAIL_FOLDERS)]
        return JsonResponse({"username": username, "count": len(folders), "folders": folders})


# ------------------------------------------------------------------------------
# TEST-ONLY control endpoints. They exist for brokerd's integration tests and have
# no authentication; never put them in front of anything real.

def _int(request, name, default=None):
    value = request.GET.get(name, request.POST.get(name))
    return default if value in (None, "") else int(value)


def _str(request, name, default=None):
    value = request.GET.get(name, request.POST.get(name))
    return default if value in (None, "") else value


def _user(request):
    username = _str(request, "username")
    if not username:
        return None, JsonResponse({"error": "username is required"}, status=400)
    try:
        return get_user_model().objects.get(username=username), None
    except get_user_model().DoesNotExist:
        return None, JsonResponse({"error": f"no user {username!r}"}, status=404)


@require_GET
def test_requests(request):
    return JsonResponse(control.snapshot(_int(request, "limit", 100), _str(request, "endpoint")))


@csrf_exempt
@require_POST
def test_reset_counters(request):
    control.reset_counters()
    return JsonResponse({"ok": True})


@csrf_exempt
@require_POST
def test_reset(request):
    control.reset_counters()
    control.reset_faults()
    control.reset_device_polls()
    control.DECLINED_SCOPES.clear()
    return JsonResponse({"ok": True})


@csrf_exempt
@require_POST
def test_fail_next(request):
    status = _int(request, "status", 503)
    control.add_fault(status, _int(request, "count", 1), _str(request, "endpoint", "token"),
                      _str(request, "grant_type"), _str(request, "error", "temporarily_unavailable"),
                      _int(request, "retry_after"))
    return JsonResponse({"ok": True, **control.faults_snapshot()})


@csrf_exempt
@require_POST
def test_decline_scope(request):
    control.DECLINED_SCOPES.add(_str(request, "scope"))
    return JsonResponse({"ok": True, "declined": sorted(control.DECLINED_SCOPES)})


@csrf_exempt
@require_POST
def test_delay(request):
    control.set_delay(_int(request, "ms", 0), _int(request, "count"), _str(request, "endpoint", "token"))
    return JsonResponse({"ok": True, **control.faults_snapshot()})


@require_GET
def test_faults(request):
    return JsonResponse(control.faults_snapshot())


@csrf_exempt
@require_POST
def test_revoke_refresh_tokens(request):
    user, error = _user(request)
    if error:
        return error
    tokens = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True)
    client_id = _str(request, "client_id")
    if client_id:
        tokens = tokens.filter(application__client_id=client_id)
    revoked = 0
    for token in list(tokens):
        token.revoke()  # also deletes the paired access token
        revoked += 1
    return JsonResponse({"ok": True, "revoked": revoked})


def _pending_device(request):
    code = "".join(ch for ch in _str(request, "user_code", "").upper() if ch.isalnum())
    model = get_device_grant_model()
    grant = model.objects.filter(user_code=code).order_by("-id").first()
    if grant is None:
        return None, JsonResponse({"error": "unknown user_code"}, status=404)
    if grant.is_expired() or grant.status != model.AUTHORIZATION_PENDING:
        return None, JsonResponse({"error": f"device grant is {grant.status}"}, status=409)
    return grant, None


def _decide_device(request, approve):
    grant, error = _pending_device(request)
    if error:
        return error
    user, error = _user(request) if (approve or _str(request, "username")) else (None, None)
    if error:
        return error
    grant.user = user
    grant.status = grant.AUTHORIZED if approve else grant.DENIED
    grant.save(update_fields=["user", "status"])
    return JsonResponse({"ok": True, "client_id": grant.client_id, "scope": grant.scope,
                         "status": grant.status})


@csrf_exempt
@require_POST
def test_approve_device(request):
    return _decide_device(request, approve=True)


@csrf_exempt
@require_POST
def test_deny_device(request):
    return _decide_device(request, approve=False)


CONFIG_TO_DOT = {
    "id_token_expire_seconds": "ID_TOKEN_EXPIRE_SECONDS",
    "refresh_token_expire_seconds": "REFRESH_TOKEN_EXPIRE_SECONDS",
    "authorization_code_expire_seconds": "AUTHORIZATION_CODE_EXPIRE_SECONDS",
}


@csrf_exempt
def test_config(request):
    """GET: current lifetimes. POST ?name=seconds&...: change them for new tokens."""
    if request.method == "POST":
        for name in control.CONFIG:
            value = _int(request, name)
            if value is None:
                continue
            control.CONFIG[name] = value
            if name in CONFIG_TO_DOT:  # DOT reads these from its settings object
                setattr(oauth2_settings, CONFIG_TO_DOT[name], value or (
                    None if name == "refresh_token_expire_seconds" else value))
    return JsonResponse({**control.CONFIG, **control.FLAGS})
