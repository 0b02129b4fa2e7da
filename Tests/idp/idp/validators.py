"""OAuth2Validator tweaks: multi-grant public clients, loopback redirects, OIDC claims."""

import uuid
from urllib.parse import urlsplit

from oauth2_provider.oauth2_validators import OAuth2Validator

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
ALLOWED_GRANTS = {
    "authorization_code",
    "refresh_token",
    "urn:ietf:params:oauth:grant-type:device_code",
}


def subject_for(user):
    """Stable, opaque-looking `sub` per username (same value in every state dir)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "brokerd-test-idp:" + user.get_username()))


# token_family -> scopes of the grant that started the refresh-token chain. In memory
# only: after a restart DOT's own rule (scopes of the previous access token) applies.
_family_scopes = {}


class TestValidator(OAuth2Validator):
    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs):
        # DOT stores a single grant type per application; every test client may use
        # the code flow, the device flow and refresh tokens.
        if grant_type in ALLOWED_GRANTS:
            return True
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs):
        return response_type == "code"

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        # RFC 8252 section 7.3: http loopback redirects on any port. This fixture
        # also accepts any path on them (the code exchange still needs an exact match).
        parts = urlsplit(redirect_uri)
        if (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
                and not parts.fragment and "@" not in parts.netloc):
            return True
        return super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        token = super()._create_refresh_token(request, refresh_token_code, access_token,
                                              previous_refresh_token)
        if previous_refresh_token is None:
            _family_scopes[token.token_family] = access_token.scope.split()
        return token

    def get_original_scopes(self, refresh_token, request, *args, **kwargs):
        # RFC 6749 section 6: a refresh may ask for any scope "originally granted".
        # Stock DOT compares with the previous access token, so one narrowed refresh
        # would narrow the whole rotated chain for good.
        family = getattr(request.refresh_token_instance, "token_family", None)
        if family in _family_scopes:
            return list(_family_scopes[family])
        return super().get_original_scopes(refresh_token, request, *args, **kwargs)

    def get_claim_dict(self, request):
        user = request.user
        full_name = f"{user.first_name} {user.last_name}".strip()
        return {
            "sub": subject_for(user),
            "name": full_name or user.get_username(),
            "given_name": user.first_name,
            "family_name": user.last_name,
            "preferred_username": user.get_username(),
            "email": user.email,
            "email_verified": True,
        }

    def get_discovery_claims(self, request):
        return ["sub", "name", "given_name", "family_name", "preferred_username",
                "email", "email_verified"]
