"""Django settings for the test IdP. serve.py sets IDP_STATE_DIR before loading them."""

import os
from pathlib import Path

from idp import control

STATE_DIR = Path(os.environ["IDP_STATE_DIR"])
BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = "brokerd-test-idp-not-a-secret"  # test fixture only
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
ROOT_URLCONF = "idp.urls"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "idp",
]
MIDDLEWARE = [
    "idp.middleware.TestControlMiddleware",  # counts token traffic, injects faults/delays
    "idp.middleware.SerializeMiddleware",  # one request at a time inside Django (sqlite)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
    ]},
}]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": STATE_DIR / "idp.sqlite3",
    "OPTIONS": {"timeout": 20, "init_command": "PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY;"},
}}
# Fast hashing: passwords here are well-known test values.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
SESSION_COOKIE_NAME = "idp_session"
CSRF_COOKIE_NAME = "idp_csrftoken"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}},
}

SCOPES = {
    "openid": "OpenID Connect sign-in",
    "profile": "Your name and username",
    "email": "Your email address",
    "offline_access": "Stay signed in (refresh tokens)",
    "user.read": "Read your profile",
    "mail.read": "Read your mail",
    "files.read": "Read your files",
}

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (STATE_DIR / "oidc-signing-key.pem").read_text(),
    # No OIDC_ISS_ENDPOINT: the issuer is derived per request from scheme + Host,
    # so the http and the https listener each publish a self-consistent issuer.
    "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OIDC_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": [
        "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    "SCOPES": SCOPES,
    "DEFAULT_SCOPES": ["openid"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only, "plain" rejected
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OAUTH2_VALIDATOR_CLASS": "idp.validators.TestValidator",
    "REQUEST_APPROVAL_PROMPT": "auto",
    "ACCESS_TOKEN_EXPIRE_SECONDS": control.CONFIG["access_token_expire_seconds"],
    "ID_TOKEN_EXPIRE_SECONDS": control.CONFIG["id_token_expire_seconds"],
    "REFRESH_TOKEN_EXPIRE_SECONDS": control.CONFIG["refresh_token_expire_seconds"] or None,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": control.CONFIG["authorization_code_expire_seconds"],
    "ROTATE_REFRESH_TOKEN": control.FLAGS["rotate_refresh_token"],
    "REFRESH_TOKEN_REUSE_PROTECTION": control.FLAGS["refresh_token_reuse_protection"],
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": control.FLAGS["refresh_token_grace_period_seconds"],
    "DEVICE_FLOW_INTERVAL": control.CONFIG["device_flow_interval"],
    # Placeholder: views.DeviceAuthorizationView rewrites it to this listener's URL.
    "OAUTH_DEVICE_VERIFICATION_URI": "/device/",
    "EXTRA_SERVER_KWARGS": {"token_expires_in": control.access_token_expires_in},
}
