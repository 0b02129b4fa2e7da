"""URL map. DOT's endpoints are mounted at the root (issuer = scheme://host:port)
under DOT's own namespace, with our subclasses where we extend DOT."""

from django.contrib.auth.views import LogoutView
from django.urls import include, path, re_path
from oauth2_provider import views as dot

from idp import views

oauth2_patterns = ([
    path("authorize/", dot.AuthorizationView.as_view(), name="authorize"),
    path("token/", views.TokenView.as_view(), name="token"),
    path("revoke_token/", dot.RevokeTokenView.as_view(), name="revoke-token"),
    path("introspect/", dot.IntrospectTokenView.as_view(), name="introspect"),
    path("device-authorization/", views.DeviceAuthorizationView.as_view(), name="device-authorization"),
    path("device/", dot.DeviceUserCodeView.as_view(), name="device"),
    path("device-confirm/<slug:client_id>/<slug:user_code>", dot.DeviceConfirmView.as_view(),
         name="device-confirm"),
    path("device-grant-status/<slug:client_id>/<slug:user_code>", dot.DeviceGrantStatusView.as_view(),
         name="device-grant-status"),
    re_path(r"^\.well-known/openid-configuration/?$", views.DiscoveryView.as_view(),
            name="oidc-connect-discovery-info"),
    path(".well-known/oauth-authorization-server", views.ServerMetadataView.as_view(),
         name="oauth-server-metadata"),
    path(".well-known/jwks.json", dot.JwksInfoView.as_view(), name="jwks-info"),
    path("userinfo/", dot.UserInfoView.as_view(), name="user-info"),
], "oauth2_provider")

urlpatterns = [
    path("", include(oauth2_patterns)),
    path("", views.index),
    path("accounts/login/", views.TestLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    # Fake protected resources for the sample apps (Examples/): DOT checks token + scope.
    path("api/me", views.MeView.as_view()),
    path("api/mailfolders", views.MailFoldersView.as_view()),
    # TEST-ONLY control endpoints (no authentication).
    path("test/requests", views.test_requests),
    path("test/reset-counters", views.test_reset_counters),
    path("test/reset", views.test_reset),
    path("test/fail-next", views.test_fail_next),
    path("test/delay", views.test_delay),
    path("test/decline-scope", views.test_decline_scope),
    path("test/faults", views.test_faults),
    path("test/revoke-refresh-tokens", views.test_revoke_refresh_tokens),
    path("test/approve-device", views.test_approve_device),
    path("test/deny-device", views.test_deny_device),
    path("test/config", views.test_config),
]
