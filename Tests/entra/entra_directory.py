"""The Entra ID test emulator's directory: tenants, users, clients, resources, authorities, scopes.

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.
"""

from dataclasses import dataclass, field

CONTOSO = "11111111-1111-1111-1111-111111111111"
FABRIKAM = "22222222-2222-2222-2222-222222222222"
MSA = "9188040d-6c67-4c5b-b112-36a304b66dad"  # the consumers ("personal Microsoft account") tenant
B2C = "33333333-3333-3333-3333-333333333333"  # contosob2c.onmicrosoft.com

FAM_A = "aaaaaaaa-0000-0000-0000-00000000000a"
FAM_B = "bbbbbbbb-0000-0000-0000-00000000000b"
CLIENT_C = "cccccccc-0000-0000-0000-00000000000c"

OIDC_SCOPES = ("openid", "profile", "email", "offline_access")


@dataclass
class Tenant:
    id: str
    name: str
    kind: str  # "aad", "msa", "b2c"
    domains: list
    region: str = "NA"
    policies: list = field(default_factory=list)


@dataclass
class User:
    username: str
    password: str
    name: str
    given_name: str
    family_name: str
    kind: str  # "aad", "msa", "b2c", "adfs"
    home: str  # home tenant id ("adfs" for ADFS users)
    oid: str  # object id in the home tenant (B2C: the user's object id; ADFS: none)
    guest_oids: dict = field(default_factory=dict)  # tenant id -> oid of the guest object there


@dataclass
class Client:
    id: str
    name: str
    family: str = ""  # "1" for FOCI members


TENANTS = {
    CONTOSO: Tenant(CONTOSO, "Contoso", "aad", ["contoso.example"]),
    FABRIKAM: Tenant(FABRIKAM, "Fabrikam", "aad", ["fabrikam.example"], region="EU"),
    MSA: Tenant(MSA, "Microsoft Accounts", "msa", [], region=None),
    B2C: Tenant(B2C, "Contoso B2C", "b2c", ["contosob2c.onmicrosoft.com"],
                policies=["B2C_1_signin", "B2C_1_signup_signin"]),
}

USERS = {u.username: u for u in [
    User("alice@contoso.example", "alice-password", "Alice Anderson", "Alice", "Anderson", "aad", CONTOSO,
         "a1ce0000-0000-4000-8000-000000000001", {FABRIKAM: "a1ce0000-0000-4000-8000-0000000000f2"}),
    User("bob@contoso.example", "bob-password", "Bob Brown", "Bob", "Brown", "aad", CONTOSO,
         "b0b00000-0000-4000-8000-000000000002"),
    User("carol@outlook.example", "carol-password", "Carol Clark", "Carol", "Clark", "msa", MSA,
         "00000000-0000-0000-ca01-c0ffee000003"),
    User("dana@b2c.example", "dana-password", "Dana Diaz", "Dana", "Diaz", "b2c", B2C,
         "da0a0000-0000-4000-8000-000000000004"),
    User("frank@corp.example", "frank-password", "Frank Fischer", "Frank", "Fischer", "adfs", "adfs", ""),
]}

CLIENTS = {c.id: c for c in [
    Client(FAM_A, "Family App A", "1"),
    Client(FAM_B, "Family App B", "1"),
    Client(CLIENT_C, "App C (not in the family)"),
]}

# Resources (App ID URIs), their delegated permissions, and what `/.default` expands to
# (the statically configured permissions). A scope is resource + "/" + permission, split at the
# last "/", so the Azure Resource Manager resource "https://management.core.windows.net/" gives
# "https://management.core.windows.net//user_impersonation".
GRAPH = "https://graph.microsoft.com"
ARM = "https://management.core.windows.net/"
RESOURCES = {
    GRAPH: {"permissions": ["User.Read", "Mail.Read", "Mail.Send", "Files.Read", "Calendars.Read"],
            "default": ["User.Read", "Mail.Read"]},
    ARM: {"permissions": ["user_impersonation"], "default": ["user_impersonation"]},
    "api://brokerd-test-api": {"permissions": ["access_as_user", "Data.Read"], "default": ["access_as_user"]},
}
B2C_RESOURCES = {
    "https://contosob2c.onmicrosoft.com/api": {"permissions": ["read", "write"], "default": ["read"]},
}

# Instance discovery metadata as the public cloud publishes it.
INSTANCE_METADATA = [
    {"preferred_network": "login.microsoftonline.com", "preferred_cache": "login.windows.net",
     "aliases": ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"]},
    {"preferred_network": "login.partner.microsoftonline.cn", "preferred_cache": "login.partner.microsoftonline.cn",
     "aliases": ["login.partner.microsoftonline.cn", "login.chinacloudapi.cn"]},
    {"preferred_network": "login.microsoftonline.de", "preferred_cache": "login.microsoftonline.de",
     "aliases": ["login.microsoftonline.de"]},
    {"preferred_network": "login.microsoftonline.us", "preferred_cache": "login.microsoftonline.us",
     "aliases": ["login.microsoftonline.us", "login.usgovcloudapi.net"]},
    {"preferred_network": "login-us.microsoftonline.com", "preferred_cache": "login-us.microsoftonline.com",
     "aliases": ["login-us.microsoftonline.com"]},
]
KNOWN_INSTANCES = {alias for entry in INSTANCE_METADATA for alias in entry["aliases"]}

# AADSTS messages (wording after the public error-code reference; numbers where the emulator had
# to pick one are marked "emulator").
MESSAGES = {
    28000: "Provided value for the input parameter scope is not valid because it contains more than one resource.",
    50011: "The redirect URI specified in the request does not match the redirect URIs configured for the application.",
    50020: "User account from identity provider does not exist in tenant and cannot access the application in that tenant.",
    50034: "The user account does not exist in the directory. To sign into this application, the account must be added to the directory.",
    50049: "Unknown or invalid instance.",
    50058: "A silent sign-in request was sent but no user is signed in.",
    50076: "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access the resource.",
    50079: "Due to a configuration change made by your administrator, or because you moved to a new location, you must enroll in multi-factor authentication to access the resource.",
    50126: "Error validating credentials due to invalid username or password.",
    50148: "The code_verifier does not match the code_challenge supplied in the authorization request for PKCE.",
    50173: "The provided grant has expired due to it being revoked, a fresh auth token is needed.",
    53003: "Access has been blocked by Conditional Access policies. The access policy does not allow token issuance.",
    54005: "OAuth2 Authorization code was already redeemed, please retry with a new valid code or use an existing refresh token.",
    65001: "The user or administrator has not consented to use the application.",
    65004: "User declined to consent to access the app.",
    70000: "The provided value for the 'refresh_token' is not valid.",
    70003: "The app requested an unsupported grant type.",
    70008: "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource.",
    70011: "The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid.",
    70016: "OAuth 2.0 device flow error. Authorization is pending. Continue polling.",
    70018: "The provided value for the input parameter 'device_code' is not valid.",  # emulator
    70019: "The device code has expired.",
    70020: "The user declined the device code sign-in.",  # emulator
    90002: "Tenant '{}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud. Check with your subscription administrator, this may happen if there are no active subscriptions for the tenant.",
    90014: "The required field is missing from the credential.",
    90015: "The claims parameter is not valid JSON.",  # emulator
    500011: "The resource principal named {} was not found in the tenant. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You might have sent your authentication request to the wrong tenant.",
    500112: "The reply address does not match the reply address provided when requesting the authorization code.",
    700016: "Application with identifier '{}' was not found in the directory. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant.",
    700025: "Client is public so neither 'client_assertion' nor 'client_secret' should be presented.",
    700054: "The response_type is not enabled for the application.",
    700082: "The refresh token has expired due to inactivity.",
    900144: "The request body must contain the following parameter: '{}'.",
    900561: "The endpoint only accepts POST requests.",
    9002313: "Invalid request. Request is malformed or invalid.",
    9002325: "Proof Key for Code Exchange is required for cross-origin authorization code redemption.",
}


def message(code, detail=""):
    """"AADSTS<code>: <published wording>[ <detail>]" ({} in the wording takes the detail)."""
    text = MESSAGES.get(code, "Emulated failure.")
    if "{}" in text:
        return "AADSTS%d: %s" % (code, text.replace("{}", detail))
    return "AADSTS%d: %s%s" % (code, text, (" " + detail) if detail else "")


@dataclass
class Authority:
    """Where a request was sent: an Entra tenant (or common/organizations/consumers), a B2C policy, or ADFS."""
    kind: str  # "aad", "b2c", "adfs"
    segment: str  # the tenant segment as the client wrote it ("contoso.example", "common", …)
    tenant: Tenant = None  # a specific tenant, else None (common/organizations/consumers, ADFS)
    audience: str = ""  # "common", "organizations", "consumers", "" for a specific tenant
    policy: str = ""  # B2C policy, as configured (e.g. "B2C_1_signin")
    tfp: bool = False  # B2C "/tfp/{tenant}/{policy}" form

    def prefix(self, base, resolved=True):
        """URL prefix of this authority's endpoints; a domain-named tenant becomes its GUID, as Entra's discovery does."""
        if self.kind == "adfs":
            return base + "/adfs"
        if self.kind == "b2c":
            return "%s%s/%s/%s" % (base, "/tfp" if self.tfp else "", self.segment, self.policy.lower())
        if self.tenant is not None and resolved and self.audience == "":
            return "%s/%s" % (base, self.tenant.id)
        return "%s/%s" % (base, self.segment)

    def issuer(self, base, tenant_id=None):
        if self.kind == "adfs":
            return base + "/adfs"
        if self.kind == "b2c":
            return "%s%s/%s/%sv2.0/" % (base, "/tfp" if self.tfp else "", self.tenant.id,
                                        (self.policy.lower() + "/") if self.tfp else "")
        if tenant_id:
            return "%s/%s/v2.0" % (base, tenant_id)
        if self.tenant is not None:
            return "%s/%s/v2.0" % (base, self.tenant.id)
        if self.audience == "consumers":
            return "%s/%s/v2.0" % (base, MSA)
        return base + "/{tenantid}/v2.0"


def find_tenant(segment):
    key = segment.lower()
    if key in TENANTS:
        return TENANTS[key]
    for tenant in TENANTS.values():
        if key in tenant.domains:
            return tenant
    return None


def aad_authority(segment):
    """Authority for /{segment}/…, or None when the tenant is unknown."""
    key = segment.lower()
    if key in ("common", "organizations", "consumers"):
        return Authority("aad", segment, None, key)
    tenant = find_tenant(segment)
    if tenant is None:
        return None
    if tenant.kind == "msa":
        return Authority("aad", segment, tenant, "")
    return Authority(tenant.kind, segment, tenant, "")


def b2c_policy(tenant, policy):
    for name in tenant.policies:
        if name.lower() == policy.lower():
            return name
    return None


def resolve_signin(user, authority):
    """(tenant id, oid) the user gets tokens for at this authority, or (None, AADSTS code)."""
    if authority.kind == "adfs":
        return ("adfs", "") if user.kind == "adfs" else (None, 50034)
    if authority.kind == "b2c":
        return (user.home, user.oid) if user.kind == "b2c" and user.home == authority.tenant.id else (None, 50034)
    if user.kind not in ("aad", "msa"):
        return None, 50034
    if authority.tenant is not None:
        tenant_id = authority.tenant.id
        if user.home == tenant_id:
            return tenant_id, user.oid
        if tenant_id in user.guest_oids:
            return tenant_id, user.guest_oids[tenant_id]
        return None, 50020
    if authority.audience == "organizations" and user.kind == "msa":
        return None, 50020
    if authority.audience == "consumers" and user.kind != "msa":
        return None, 50020
    return user.home, user.oid


class ScopeError(Exception):
    def __init__(self, error, code, detail):
        super().__init__(detail)
        self.error, self.code, self.detail = error, code, detail


def _find_resource(resources, name):
    for candidate in (name, name.rstrip("/"), name + "/"):
        if candidate in resources:
            return candidate
    lowered = {key.lower(): key for key in resources}
    for candidate in (name, name.rstrip("/"), name + "/"):
        if candidate.lower() in lowered:
            return lowered[candidate.lower()]
    return None


def parse_scopes(scope_text, kind="aad", client_id=""):
    """Requested scopes -> {"resource", "permissions" (canonical, in order), "oidc" (requested OIDC scopes)}.

    `X/.default` expands to X's static permission list. Only OIDC scopes means Microsoft Graph
    User.Read (Entra hands out a Graph token then). Scopes of two resources are refused (AADSTS28000).
    B2C: only its API scopes, or the client id itself (then the access token's audience is the app).
    ADFS: anything is accepted and echoed.
    """
    requested = [s for s in scope_text.split() if s]
    oidc = [s for s in OIDC_SCOPES if s in requested]
    others = [s for s in requested if s not in OIDC_SCOPES]
    if kind == "adfs":
        resource = next((s.rsplit("/", 1)[0] for s in others if "/" in s), "urn:microsoft:userinfo")
        return {"resource": resource, "permissions": others, "scp": [s.rsplit("/", 1)[-1] for s in others],
                "oidc": oidc, "requested": requested}
    resources = B2C_RESOURCES if kind == "b2c" else RESOURCES
    resource, permissions, scp = None, [], []
    for scope in others:
        if kind == "b2c" and scope.lower() == client_id.lower():
            name, perms = client_id, [client_id]
            wanted = [client_id]
        else:
            if "/" in scope:
                name, perm = scope.rsplit("/", 1)
            elif kind == "aad":
                name, perm = GRAPH, scope
            else:
                raise ScopeError("invalid_scope", 70011, "The scope '%s' is not valid." % scope)
            found = _find_resource(resources, name)
            if found is None:
                raise ScopeError("invalid_resource", 500011, name)
            name = found
            known = {p.lower(): p for p in resources[name]["permissions"]}
            if perm == ".default":
                wanted = list(resources[name]["default"])
            elif perm.lower() in known:
                wanted = [known[perm.lower()]]
            else:
                raise ScopeError("invalid_scope", 70011, "The scope '%s' is not valid." % scope)
            perms = ["%s/%s" % (name, p) for p in wanted]
        if resource is not None and resource != name:
            raise ScopeError("invalid_scope", 28000, "Scope '%s' is not valid." % " ".join(others))
        resource = name
        for full, short in zip(perms, wanted):
            if full not in permissions:
                permissions.append(full)
                scp.append(short)
    if resource is None and kind == "aad":
        resource, permissions, scp = GRAPH, [GRAPH + "/User.Read"], ["User.Read"]
    return {"resource": resource, "permissions": permissions, "scp": scp, "oidc": oidc, "requested": requested}
