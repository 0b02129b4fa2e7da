"""brokerd's test-only OAuth2/OIDC authorization server (Django + django-oauth-toolkit)."""
