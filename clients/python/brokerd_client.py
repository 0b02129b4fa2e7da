"""Python client for brokerd, the per-user OAuth/OIDC token broker daemon.

brokerd serves JSON-RPC 2.0 over a Unix stream socket, one JSON object per
``\\n``-terminated line (see ``docs/protocol.md``). This module wraps it in an
MSAL-Python-like shape::

    from brokerd_client import PublicClientApplication, InteractionRequired

    app = PublicClientApplication("my-client-id", authority="https://login.example.com/tenant")
    try:
        result = app.acquire_token_silent(["user.read"], account="alice@example.com")
    except InteractionRequired:
        result = app.acquire_token_interactive(["user.read"], flow="deviceCode")
    token = result["accessToken"]

Standard library only; Python 3.9 or newer. Each call opens a fresh
connection, so a restarted daemon is picked up transparently. The peer's uid
is checked (``SO_PEERCRED``) before anything is sent: a socket served by
another user (root excepted) is refused. Nothing here logs tokens.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

__all__ = [
    "PublicClientApplication",
    "BrokerError",
    "BrokerNotRunning",
    "InteractionRequired",
    "ServerDeclinedScopes",
    "ProtectionPoliciesRequired",
    "UserCanceled",
    "ServerError",
    "resolve_socket_path",
]

__version__ = "0.1.0"

SOCKET_ENV = "BROKERD_SOCKET"

#: An account argument: an Account dict from ``get_accounts``, a homeAccountId or a username.
AccountArg = Union[Mapping[str, Any], str]
#: ``on_prompt(kind, params)``; kind is ``"browserUrl"`` or ``"deviceCode"``.
PromptCallback = Callable[[str, Dict[str, Any]], None]

_PROMPT_METHODS = ("browserUrl", "deviceCode")
# brokerd's interactive_timeout is at most 3600 s; allow a margin on top.
_INTERACTIVE_DEFAULT_TIMEOUT = 3700.0


# --------------------------------------------------------------------------- errors


class BrokerError(Exception):
    """An error answer from brokerd, or a failure to talk to it.

    ``code`` is the JSON-RPC error code (``None`` for transport failures),
    ``message`` the human-readable text (do not parse it) and ``data`` the
    error's ``data`` object (``{}`` when absent).
    """

    def __init__(self, code: Optional[int], message: str, data: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(code, message, dict(data or {}))
        self.code = code
        self.message = message
        self.data: Dict[str, Any] = dict(data or {})

    @property
    def reason(self) -> Optional[str]:
        """``data.reason`` (e.g. ``"accountNotFound"``, ``"missingScopes"``), if any."""
        value = self.data.get("reason")
        return value if isinstance(value, str) else None

    def __str__(self) -> str:
        return self.message if self.code is None else f"[{self.code}] {self.message}"


class BrokerNotRunning(BrokerError):
    """Nothing listens on the socket (it does not exist, or connecting was refused)."""

    def __init__(self, socket_path: str, cause: OSError) -> None:
        message = (
            f"brokerd is not running: cannot connect to {socket_path} ({cause.strerror or cause}). "
            "Start it with: systemctl --user start brokerd.socket"
        )
        super().__init__(None, message, {"socket": socket_path})
        self.socket_path = socket_path


class InteractionRequired(BrokerError):
    """-50002: only an interactive sign-in can help (no account, removed, refresh token refused...)."""


class ServerDeclinedScopes(BrokerError):
    """-50003: the IdP granted fewer scopes than asked. The tokens were cached anyway."""

    @property
    def granted_scopes(self) -> List[str]:
        """Scopes the IdP granted."""
        return list(self.data.get("grantedScopes") or [])

    @property
    def declined_scopes(self) -> List[str]:
        """Requested scopes the IdP did not grant."""
        return list(self.data.get("declinedScopes") or [])


class ProtectionPoliciesRequired(BrokerError):
    """-50004: the IdP requires app protection policies (suberror ``protection_policy_required``)."""


class UserCanceled(BrokerError):
    """-50005: the user declined, the flow was canceled, timed out, or the device code expired."""


class ServerError(BrokerError):
    """-50006: the IdP refused or could not be reached. See :attr:`retryable`."""

    @property
    def retryable(self) -> bool:
        """True for transient failures (IdP unreachable, 429/5xx): retry later."""
        return bool(self.data.get("retryable", False))


_ERROR_CLASSES = {
    -50002: InteractionRequired,
    -50003: ServerDeclinedScopes,
    -50004: ProtectionPoliciesRequired,
    -50005: UserCanceled,
    -50006: ServerError,
}


def _error_from_wire(error: Any) -> BrokerError:
    if not isinstance(error, dict):
        return BrokerError(None, f"malformed error from brokerd: {error!r}")
    code = error.get("code")
    message = error.get("message")
    data = error.get("data")
    cls = _ERROR_CLASSES.get(code, BrokerError) if isinstance(code, int) else BrokerError
    return cls(code if isinstance(code, int) else None,
               message if isinstance(message, str) else "unknown error",
               data if isinstance(data, dict) else None)


# --------------------------------------------------------------------------- transport


def resolve_socket_path(explicit: Optional[str] = None) -> str:
    """Find brokerd's socket the way brokerd and brokerctl do.

    An explicit path, else ``$BROKERD_SOCKET``, else
    ``<runtime dir>/brokerd/brokerd.sock`` where the runtime dir is
    ``$XDG_RUNTIME_DIR`` (if absolute), else ``/run/user/<uid>`` (if writable),
    else ``/tmp/brokerd-<uid>``.
    """
    if explicit:
        return explicit
    from_env = os.environ.get(SOCKET_ENV)
    if from_env:
        return from_env
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if not runtime.startswith("/"):
        uid = os.getuid()
        per_user = f"/run/user/{uid}"
        runtime = per_user if os.access(per_user, os.W_OK) else f"/tmp/brokerd-{uid}"
    return f"{runtime}/brokerd/brokerd.sock"


def _peer_uid(sock: socket.socket) -> int:
    """The uid of the process serving ``sock``."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        size = struct.calcsize("3i")
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))
        return uid
    if sys.platform == "darwin":  # LOCAL_PEERCRED at SOL_LOCAL: struct xucred {u_int version; uid_t uid; ...}
        raw = sock.getsockopt(0, 0x001, 76)
        _version, uid = struct.unpack("2I", raw[:8])
        return uid
    raise OSError(errno.ENOTSUP, "cannot read the peer's credentials on this platform")


_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_id() -> int:
    with _ids_lock:
        return next(_ids)


class _Call:
    """One request on its own connection: connect, check the peer, send, read the answer."""

    def __init__(self, socket_path: str, timeout: Optional[float]) -> None:
        self.socket_path = socket_path
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buffer = bytearray()

    def _remaining(self) -> Optional[float]:
        if self.deadline is None:
            return None
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerError(None, "timed out waiting for brokerd")
        return remaining

    def connect(self) -> None:
        self.sock.settimeout(self._remaining())
        try:
            self.sock.connect(self.socket_path)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            raise BrokerNotRunning(self.socket_path, exc) from None
        except socket.timeout:
            raise BrokerError(None, f"timed out connecting to {self.socket_path}") from None
        except OSError as exc:
            raise BrokerError(None, f"cannot connect to {self.socket_path}: {exc}") from None
        try:
            uid = _peer_uid(self.sock)
        except OSError as exc:
            raise BrokerError(None, f"refusing {self.socket_path}: cannot verify who serves it ({exc})") from None
        if uid != os.getuid() and uid != 0:
            raise BrokerError(None, f"refusing {self.socket_path}: it is served by uid {uid}, not by uid {os.getuid()}")

    def send(self, message: Mapping[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        self.sock.settimeout(self._remaining())
        try:
            self.sock.sendall(line)
        except socket.timeout:
            raise BrokerError(None, "timed out sending to brokerd") from None
        except OSError as exc:
            raise BrokerError(None, f"lost the connection to brokerd: {exc}") from None

    def read_message(self) -> Any:
        """The next non-empty line, decoded."""
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline]).strip()
                del self.buffer[: newline + 1]
                if not line:
                    continue
                try:
                    return json.loads(line.decode("utf-8"))
                except ValueError:
                    raise BrokerError(None, "brokerd sent a line that is not JSON") from None
            self.sock.settimeout(self._remaining())
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise BrokerError(None, "timed out waiting for brokerd's answer") from None
            except OSError as exc:
                raise BrokerError(None, f"lost the connection to brokerd: {exc}") from None
            if not chunk:
                raise BrokerError(None, "brokerd closed the connection before answering")
            self.buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# -32002 (too many connections, or the daemon is stopping as we connect) and -32004
# (shutting down) mean the request was not run: a restarting brokerd (systemctl restart,
# socket activation) answers them for a moment, so they are retried after these pauses.
_RETRIED_CODES = (-32002, -32004)
_RETRY_DELAYS = (0.1, 0.3, 1.0)


def _call(socket_path: str, method: str, params: Mapping[str, Any], timeout: Optional[float],
          on_notification: Optional[Callable[[str, Dict[str, Any]], None]] = None) -> Dict[str, Any]:
    """Send one request and return its ``result``; raise :class:`BrokerError` on an error answer.

    Notifications are passed to ``on_notification(method, params)``; answers to
    other ids (there should be none) are skipped. Refusals that mean "not run, the
    daemon is restarting" are retried a few times within ``timeout``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    for delay in _RETRY_DELAYS + (None,):
        remaining = None if deadline is None else deadline - time.monotonic()
        try:
            return _call_once(socket_path, method, params, remaining, on_notification)
        except BrokerError as exc:
            if exc.code not in _RETRIED_CODES or delay is None or (
                    deadline is not None and time.monotonic() + delay >= deadline):
                raise
        time.sleep(delay)
    raise AssertionError("unreachable")


def _call_once(socket_path: str, method: str, params: Mapping[str, Any], timeout: Optional[float],
               on_notification: Optional[Callable[[str, Dict[str, Any]], None]]) -> Dict[str, Any]:
    request_id = _next_id()
    call = _Call(socket_path, timeout)
    try:
        call.connect()
        call.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)})
        while True:
            message = call.read_message()
            if not isinstance(message, dict):
                continue  # a batch answer: not ours
            if "id" not in message:
                name = message.get("method")
                if on_notification is not None and isinstance(name, str):
                    notification_params = message.get("params")
                    on_notification(name, notification_params if isinstance(notification_params, dict) else {})
                continue
            answer_id = message.get("id")
            if answer_id is None and "error" in message:
                # Connection-level refusal (-32001 permission, -32002 too many, -32003 too large) or a parse error.
                raise _error_from_wire(message["error"])
            if answer_id != request_id:
                continue
            if "error" in message:
                raise _error_from_wire(message["error"])
            result = message.get("result")
            if not isinstance(result, dict):
                raise BrokerError(None, f"brokerd answered {method} without a result object")
            return result
    finally:
        call.close()


# --------------------------------------------------------------------------- helpers


def _account_reference(account: AccountArg) -> Union[str, Dict[str, str]]:
    """Turn an Account dict, homeAccountId or username into a wire AccountReference."""
    if isinstance(account, str):
        if not account:
            raise ValueError("account must not be empty")
        return account
    if isinstance(account, Mapping):
        home = account.get("homeAccountId") or account.get("home_account_id")
        username = account.get("username")
        if isinstance(home, str) and home:
            return {"homeAccountId": home}
        if isinstance(username, str) and username:
            return {"username": username}
        raise ValueError("account dict has neither homeAccountId nor username")
    raise TypeError("account must be an Account dict, a homeAccountId or a username")


def _claims_text(claims: Union[None, str, Mapping[str, Any]]) -> Optional[str]:
    if claims is None or isinstance(claims, str):
        return claims
    return json.dumps(claims, separators=(",", ":"))


def _scopes_list(scopes: Sequence[str]) -> List[str]:
    if isinstance(scopes, str):
        raise TypeError("scopes must be a list of strings, not a string")
    return list(scopes)


def default_prompt(kind: str, params: Mapping[str, Any]) -> None:
    """Default ``on_prompt``: tell the user on stderr what to do."""
    if kind == "browserUrl":
        print(f"To sign in, open this URL in a browser:\n  {params.get('url', '')}", file=sys.stderr, flush=True)
    elif kind == "deviceCode":
        message = params.get("message") or (
            f"To sign in, open {params.get('verificationUri', '')} and enter the code {params.get('userCode', '')}."
        )
        print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- application


class PublicClientApplication:
    """A public client app whose tokens brokerd holds.

    :param client_id: the app's OAuth client id.
    :param authority: the authority URL; ``None`` lets brokerd use a profile's or its ``default_authority``.
    :param socket_path: brokerd's socket; ``None`` resolves it like brokerd does (see :func:`resolve_socket_path`).
    :param timeout: seconds a non-interactive call may take, connecting included.
    """

    def __init__(self, client_id: str, authority: Optional[str] = None, socket_path: Optional[str] = None,
                 timeout: float = 120) -> None:
        if not client_id:
            raise ValueError("client_id must not be empty")
        self.client_id = client_id
        self.authority = authority
        self.socket_path = resolve_socket_path(socket_path)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"PublicClientApplication(client_id={self.client_id!r}, authority={self.authority!r}, socket_path={self.socket_path!r})"

    # -- raw access

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Call any brokerd method (e.g. ``importCache``) and return its ``result`` object."""
        return _call(self.socket_path, method, params or {}, self.timeout if timeout is None else timeout)

    # -- daemon

    def version(self) -> Dict[str, Any]:
        """``getBrokerVersion``: ``{"version", "protocolVersion", "methods"}``."""
        return self.call("getBrokerVersion")

    def status(self) -> Dict[str, Any]:
        """``getStatus``: the daemon's and the cache's health."""
        return self.call("getStatus")

    # -- accounts

    def get_accounts(self, username: Optional[str] = None) -> List[Dict[str, Any]]:
        """Accounts this client can see, optionally only those whose username matches (ignoring case)."""
        accounts = self.call("getAccounts", {"clientId": self.client_id}).get("accounts") or []
        if username is not None:
            wanted = username.casefold()
            accounts = [a for a in accounts if str(a.get("username", "")).casefold() == wanted]
        return accounts

    def get_account(self, home_account_id: Optional[str] = None, username: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """One account by homeAccountId or username (ignoring case), or ``None`` if this client cannot see it."""
        if not home_account_id and not username:
            raise ValueError("get_account needs home_account_id or username")
        params: Dict[str, Any] = {"clientId": self.client_id}
        if home_account_id:
            params["homeAccountId"] = home_account_id
        if username:
            params["username"] = username
        return self.call("getAccount", params).get("account")

    def remove_account(self, account: AccountArg) -> Dict[str, Any]:
        """Remove the account from this client only (family refresh tokens are kept). Returns the RemovalResult."""
        return self.call("removeAccount", {"clientId": self.client_id, "account": _account_reference(account)})

    def sign_out(self, account: AccountArg) -> Dict[str, Any]:
        """Sign the account out everywhere: every token and Account entry of it, for every client."""
        return self.call("signOut", {"account": _account_reference(account)})

    # -- tokens

    def _token_params(self, scopes: Sequence[str], claims: Union[None, str, Mapping[str, Any]],
                      resource: Optional[str], correlation_id: Optional[str]) -> Dict[str, Any]:
        params: Dict[str, Any] = {"clientId": self.client_id, "scopes": _scopes_list(scopes)}
        if self.authority:
            params["authority"] = self.authority
        claims_text = _claims_text(claims)
        if claims_text is not None:
            params["claims"] = claims_text
        if resource:
            params["resource"] = resource
        if correlation_id:
            params["correlationId"] = correlation_id
        return params

    def acquire_token_silent(self, scopes: Sequence[str], account: AccountArg, force_refresh: bool = False,
                             claims: Union[None, str, Mapping[str, Any]] = None, resource: Optional[str] = None,
                             correlation_id: Optional[str] = None) -> Dict[str, Any]:
        """A token from the cache or by refresh, without UI.

        ``claims`` is a claims challenge (JSON text or a dict); it bypasses the access-token
        cache. ``resource`` (ADAL style) adds ``<resource>/.default`` to the scopes.
        ``correlation_id`` is echoed in the result.
        Returns the TokenResult dict (``accessToken``, ``expiresOn``, ``grantedScopes``,
        ``account``, ``source``...). Raises :class:`InteractionRequired` when only an
        interactive sign-in can help, or another :class:`BrokerError`.
        """
        params = self._token_params(scopes, claims, resource, correlation_id)
        params["account"] = _account_reference(account)
        if force_refresh:
            params["forceRefresh"] = True
        return self.call("acquireTokenSilently", params)

    def acquire_token_interactive(self, scopes: Sequence[str], flow: str = "browser", login_hint: Optional[str] = None,
                                  prompt: Optional[str] = None, claims: Union[None, str, Mapping[str, Any]] = None,
                                  on_prompt: Optional[PromptCallback] = None,
                                  extra_scopes_to_consent: Optional[Sequence[str]] = None,
                                  timeout: Optional[float] = None, resource: Optional[str] = None,
                                  correlation_id: Optional[str] = None) -> Dict[str, Any]:
        """Sign the user in with the browser (``flow="browser"``) or a device code (``flow="deviceCode"``).

        ``on_prompt(kind, params)`` is called for each ``browserUrl`` (params: ``url``,
        ``requestId``) or ``deviceCode`` (``userCode``, ``verificationUri``, ``message``,
        ``expiresIn``, ``requestId``) notification; by default the URL or message is
        printed to stderr. If ``on_prompt`` raises, or the wait ends without an answer
        (timeout, lost connection, ``KeyboardInterrupt``), the flow is canceled and the
        exception re-raised.
        ``timeout`` defaults to a bit over brokerd's maximum ``interactive_timeout``.
        ``extra_scopes_to_consent``: more scopes to consent to now, so that later silent
        requests for them need no UI (incremental consent). ``resource`` and
        ``correlation_id`` as for :meth:`acquire_token_silent`.
        Returns the TokenResult dict (``source == "interactive"``).
        """
        params = self._token_params(scopes, claims, resource, correlation_id)
        params["flow"] = flow
        if login_hint:
            params["loginHint"] = login_hint
        if prompt:
            params["prompt"] = prompt
        if extra_scopes_to_consent:
            params["extraScopesToConsent"] = _scopes_list(extra_scopes_to_consent)
        callback = on_prompt or default_prompt
        request_ids: List[str] = []

        def on_notification(name: str, notification: Dict[str, Any]) -> None:
            if name not in _PROMPT_METHODS:
                return  # not for us
            request_id = notification.get("requestId")
            if isinstance(request_id, str):
                request_ids.append(request_id)
            callback(name, notification)

        try:
            return _call(self.socket_path, "acquireTokenInteractively", params,
                         _INTERACTIVE_DEFAULT_TIMEOUT if timeout is None else timeout, on_notification)
        except BaseException as exc:
            if isinstance(exc, BrokerError) and exc.code is not None:
                raise  # brokerd answered: the flow is over
            for request_id in request_ids:  # best effort: do not leave a flow running
                try:
                    _call(self.socket_path, "cancelInteractiveFlow", {"requestId": request_id}, 5)
                except (BrokerError, OSError):
                    pass
            raise

    def cancel_interactive_flow(self, request_id: str) -> bool:
        """Cancel a running interactive flow by the ``requestId`` of its prompt; True if one was running."""
        return bool(self.call("cancelInteractiveFlow", {"requestId": request_id}).get("canceled"))
