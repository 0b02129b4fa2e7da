"""Tests of brokerd_client: offline ones against a fake brokerd, end-to-end ones against a REAL
running brokerd and test IdP.

Environment (end-to-end tests):
  BROKERD_SOCKET            brokerd's socket (unset: the end-to-end tests are skipped; the
                            offline tests, which serve a fake brokerd on a temporary socket, run)
  BROKERD_TEST_CLIENT_ID    client id (default brokerd-test-app-a)
  BROKERD_TEST_AUTHORITY    the IdP's http issuer (default: brokerd's default_authority)
  BROKERD_TEST_APPROVE_URL  URL template to POST to approve a device code, with {code}, e.g.
                            http://127.0.0.1:PORT/test/approve-device?user_code={code}&username=alice
  BROKERD_TEST_IDP          the test IdP's base URL for its /test/ control endpoints (default: the
                            scheme and host of BROKERD_TEST_APPROVE_URL)
  BROKERD_TEST_BROWSER      the scripted browser for the browser flow (default: the repository's
                            Tests/idp/fake_browser.py); brokerd should run with open_browser = "never"
  BROKERD_TEST_USER         user to sign in (default alice)

Run: python3 test_client.py [-v]. Signs the test user out of brokerd before and after each
end-to-end test. Never prints a token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import brokerd_client as bc  # noqa: E402

SOCKET = os.environ.get("BROKERD_SOCKET", "")
CLIENT_ID = os.environ.get("BROKERD_TEST_CLIENT_ID", "brokerd-test-app-a")
AUTHORITY = os.environ.get("BROKERD_TEST_AUTHORITY") or None
APPROVE_URL = os.environ.get("BROKERD_TEST_APPROVE_URL", "")
USER = os.environ.get("BROKERD_TEST_USER", "alice")
SCOPES = ["user.read"]


def _idp_base() -> str:
    explicit = os.environ.get("BROKERD_TEST_IDP", "")
    if explicit or not APPROVE_URL:
        return explicit.rstrip("/")
    parts = urllib.parse.urlsplit(APPROVE_URL)
    return f"{parts.scheme}://{parts.netloc}"


IDP = _idp_base()
_DEFAULT_BROWSER = Path(__file__).resolve().parents[2] / "Tests" / "idp" / "fake_browser.py"
BROWSER = os.environ.get("BROKERD_TEST_BROWSER") or (str(_DEFAULT_BROWSER) if _DEFAULT_BROWSER.exists() else "")


def _is_test_user(account: Dict[str, Any]) -> bool:
    username = str(account.get("username", "")).casefold()
    return username == USER.casefold() or username.split("@")[0] == USER.casefold()


def _sign_out_test_user(app: bc.PublicClientApplication) -> None:
    """Remove every account of the test user, for every client (getAccounts without clientId)."""
    for account in app.call("getAccounts").get("accounts", []):
        if _is_test_user(account):
            app.sign_out(account)


def _idp_control(path: str) -> Dict[str, Any]:
    """POST to one of the test IdP's /test/ endpoints."""
    with urllib.request.urlopen(urllib.request.Request(IDP + path, data=b"", method="POST"), timeout=30) as answer:
        return json.loads(answer.read())


def _approve_device(params: Dict[str, Any]) -> None:
    url = APPROVE_URL.replace("{code}", urllib.parse.quote(params["userCode"]))
    with urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=30) as answer:
        if answer.status != 200:
            raise AssertionError(f"approving the device code answered {answer.status}")


def _sign_out_quietly(app: bc.PublicClientApplication, home_account_id: str) -> None:
    """Cleanup: sign out whoever signed in, even if it was not the test user."""
    try:
        app.sign_out(home_account_id)
    except bc.BrokerError:
        pass


class FakeBroker:
    """A stand-in for brokerd on a Unix socket, for the offline tests.

    ``handler(request, send)`` gets each request (a dict) of any connection and answers by
    calling ``send(message)`` as often as it likes (notifications, then the answer), or not
    at all. Every request is recorded in ``requests``.
    """

    def __init__(self, path: str, handler: Callable[[Dict[str, Any], Callable[[Dict[str, Any]], None]], None]) -> None:
        self.path = path
        self.handler = handler
        self.requests: List[Dict[str, Any]] = []
        self.stopped = threading.Event()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.server.settimeout(0.05)  # so that close() ends the accept loop promptly
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._connection, args=(connection,), daemon=True).start()

    def _connection(self, connection: socket.socket) -> None:
        connection.settimeout(10)

        def send(message: Dict[str, Any]) -> None:
            connection.sendall(json.dumps(message).encode() + b"\n")

        with connection:
            try:
                for line in connection.makefile("rb"):
                    request = json.loads(line)
                    self.requests.append(request)
                    self.handler(request, send)
            except OSError:
                pass  # the client went away

    def methods(self) -> List[str]:
        return [r.get("method", "") for r in self.requests]

    def close(self) -> None:
        """Stop like brokerd on a clean stop: no more connections, the socket file removed."""
        self.stopped.set()
        self.thread.join(5)
        self.server.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


def _result(request: Dict[str, Any], result: Dict[str, Any]) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def _error(request: Optional[Dict[str, Any]], code: int, message: str,
           data: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    error: Dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request["id"] if request else None, "error": error}


FAKE_ACCOUNT = {"homeAccountId": "fake-sub-alice", "username": "alice", "environment": "idp.example.test",
                "realm": "", "tenantProfiles": [], "apps": [], "hiddenFrom": [], "signInRequired": False}
FAKE_TOKEN = {"accessToken": "fake-access-token", "tokenType": "Bearer", "expiresOn": 2000000000,
              "grantedScopes": ["user.read"], "account": FAKE_ACCOUNT, "authority": "https://idp.example.test",
              "source": "cache"}


class OfflineTest(unittest.TestCase):
    """The client against a scripted fake brokerd: wire format, typed errors, prompts,
    cancellation, restarts. Needs no daemon."""

    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.socket_path = os.path.join(directory.name, "brokerd.sock")
        self.app = bc.PublicClientApplication("fake-client", authority="https://idp.example.test",
                                              socket_path=self.socket_path, timeout=10)

    def serve(self, handler: Callable[[Dict[str, Any], Callable[[Dict[str, Any]], None]], None]) -> FakeBroker:
        broker = FakeBroker(self.socket_path, handler)
        self.addCleanup(broker.close)
        return broker

    def test_typed_errors(self) -> None:
        cases = [
            (-50002, bc.InteractionRequired, {"error": "invalid_grant", "errorDescription": "expired"}),
            (-50003, bc.ServerDeclinedScopes, {"grantedScopes": ["user.read"], "declinedScopes": ["mail.send"]}),
            (-50004, bc.ProtectionPoliciesRequired, {"error": "unauthorized_client",
                                                     "suberror": "protection_policy_required"}),
            (-50005, bc.UserCanceled, None),
            (-50006, bc.ServerError, {"reason": "unavailable", "retryable": True}),
            (-50000, bc.BrokerError, None),
            (-32602, bc.BrokerError, {"reason": "missingScopes"}),
        ]
        for code, cls, data in cases:
            with self.subTest(code=code):
                broker = self.serve(lambda request, send: send(_error(request, code, f"fake {code}", data)))
                with self.assertRaises(bc.BrokerError) as caught:
                    self.app.acquire_token_silent(["user.read"], "alice")
                broker.close()
                self.assertIs(type(caught.exception), cls)
                self.assertEqual(caught.exception.code, code)
                self.assertEqual(caught.exception.data, data or {})
                self.assertIn(f"fake {code}", str(caught.exception))
        declined = bc.ServerDeclinedScopes(-50003, "declined", cases[1][2])
        self.assertEqual((declined.granted_scopes, declined.declined_scopes), (["user.read"], ["mail.send"]))
        self.assertTrue(bc.ServerError(-50006, "down", cases[4][2]).retryable)
        self.assertFalse(bc.ServerError(-50006, "refused", {"error": "invalid_client"}).retryable)
        self.assertEqual(bc.BrokerError(-32602, "x", {"reason": "missingScopes"}).reason, "missingScopes")

    def test_request_parameters(self) -> None:
        broker = self.serve(lambda request, send: send(_result(request, FAKE_TOKEN)))
        self.app.acquire_token_silent(["user.read"], FAKE_ACCOUNT, force_refresh=True,
                                      claims={"access_token": {"nbf": {"essential": True, "value": "1"}}},
                                      resource="https://api.example.test", correlation_id="corr-1")
        self.app.acquire_token_silent(["user.read"], "alice@example.test", claims='{"id_token":{}}')
        self.app.acquire_token_interactive(["user.read"], flow="deviceCode", login_hint="alice", prompt="login",
                                           extra_scopes_to_consent=["mail.read"], correlation_id="corr-2")
        silent, silent2, interactive = (r["params"] for r in broker.requests)
        self.assertEqual(silent, {"clientId": "fake-client", "scopes": ["user.read"],
                                  "authority": "https://idp.example.test",
                                  "account": {"homeAccountId": "fake-sub-alice"}, "forceRefresh": True,
                                  "claims": '{"access_token":{"nbf":{"essential":true,"value":"1"}}}',
                                  "resource": "https://api.example.test", "correlationId": "corr-1"})
        self.assertEqual(silent2["account"], "alice@example.test")
        self.assertEqual(silent2["claims"], '{"id_token":{}}')
        self.assertNotIn("forceRefresh", silent2)
        self.assertEqual(interactive, {"clientId": "fake-client", "scopes": ["user.read"],
                                       "authority": "https://idp.example.test", "flow": "deviceCode",
                                       "loginHint": "alice", "prompt": "login", "extraScopesToConsent": ["mail.read"],
                                       "correlationId": "corr-2"})
        self.assertEqual(broker.methods(), ["acquireTokenSilently"] * 2 + ["acquireTokenInteractively"])
        with self.assertRaises(TypeError):
            self.app.acquire_token_silent("user.read", "alice")  # a string is not a list of scopes

    def test_account_operations(self) -> None:
        def handler(request: Dict[str, Any], send: Callable[[Dict[str, Any]], None]) -> None:
            method, params = request["method"], request.get("params", {})
            if method == "getAccounts":
                send(_result(request, {"accounts": [FAKE_ACCOUNT]}))
            elif method == "getAccount":
                found = params.get("homeAccountId", "").lower() == "fake-sub-alice" or params.get("username") == "alice"
                send(_result(request, {"account": FAKE_ACCOUNT if found else None}))
            else:  # removeAccount, signOut
                send(_result(request, {"homeAccountId": "fake-sub-alice", "removedAccounts": 0}))

        broker = self.serve(handler)
        self.assertEqual(self.app.get_accounts(), [FAKE_ACCOUNT])
        self.assertEqual(self.app.get_accounts(username="ALICE"), [FAKE_ACCOUNT])
        self.assertEqual(self.app.get_accounts(username="bob"), [])
        self.assertEqual(self.app.get_account(home_account_id="FAKE-SUB-ALICE"), FAKE_ACCOUNT)
        self.assertEqual(self.app.get_account(username="alice"), FAKE_ACCOUNT)
        self.assertIsNone(self.app.get_account(username="bob"))
        self.app.remove_account(FAKE_ACCOUNT)
        self.app.sign_out("alice")
        params = [r.get("params", {}) for r in broker.requests]
        self.assertEqual(params[0], {"clientId": "fake-client"})
        self.assertEqual(params[3], {"clientId": "fake-client", "homeAccountId": "FAKE-SUB-ALICE"})
        self.assertEqual(params[-2], {"clientId": "fake-client", "account": {"homeAccountId": "fake-sub-alice"}})
        self.assertEqual(params[-1], {"account": "alice"})
        with self.assertRaises(ValueError):
            self.app.get_account()

    def test_prompt_callback(self) -> None:
        prompt = {"requestId": "req-1", "userCode": "ABCD1234", "verificationUri": "https://idp.example.test/device",
                  "expiresIn": 600, "message": "enter ABCD1234"}

        def handler(request: Dict[str, Any], send: Callable[[Dict[str, Any]], None]) -> None:
            send({"jsonrpc": "2.0", "method": "deviceCode", "params": prompt})
            send({"jsonrpc": "2.0", "method": "somethingElse", "params": {}})  # not a prompt: ignored
            send(_result(request, dict(FAKE_TOKEN, source="interactive")))

        self.serve(handler)
        seen: List[Any] = []
        result = self.app.acquire_token_interactive(["user.read"], flow="deviceCode",
                                                    on_prompt=lambda kind, params: seen.append((kind, params)))
        self.assertEqual(seen, [("deviceCode", prompt)])
        self.assertEqual(result["source"], "interactive")

    def test_prompt_callback_failure_cancels_the_flow(self) -> None:
        def handler(request: Dict[str, Any], send: Callable[[Dict[str, Any]], None]) -> None:
            if request["method"] == "acquireTokenInteractively":
                send({"jsonrpc": "2.0", "method": "browserUrl",
                      "params": {"requestId": "req-7", "url": "https://idp.example.test/authorize"}})
                # no answer: the flow "runs" until canceled
            elif request["method"] == "cancelInteractiveFlow":
                send(_result(request, {"canceled": True}))

        broker = self.serve(handler)

        def refuse(kind: str, params: Dict[str, Any]) -> None:
            raise RuntimeError("the user closed the window")

        with self.assertRaises(RuntimeError):
            self.app.acquire_token_interactive(["user.read"], on_prompt=refuse)
        self.assertEqual(broker.methods(), ["acquireTokenInteractively", "cancelInteractiveFlow"])
        self.assertEqual(broker.requests[1]["params"], {"requestId": "req-7"})
        # The same for a wait that times out on the client's side.
        broker.requests.clear()
        with self.assertRaises(bc.BrokerError) as caught:
            self.app.acquire_token_interactive(["user.read"], on_prompt=lambda kind, params: None, timeout=0.5)
        self.assertIsNone(caught.exception.code)
        self.assertEqual(broker.methods(), ["acquireTokenInteractively", "cancelInteractiveFlow"])
        self.assertTrue(self.app.cancel_interactive_flow("req-7"))

    def test_broker_not_running(self) -> None:
        with self.assertRaises(bc.BrokerNotRunning) as caught:  # no socket file
            self.app.version()
        self.assertIsNone(caught.exception.code)
        self.assertIn("brokerd is not running", str(caught.exception))
        self.assertIn("systemctl --user start brokerd.socket", str(caught.exception))
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a socket file nobody listens on
        stale.bind(self.socket_path)
        stale.close()
        with self.assertRaises(bc.BrokerNotRunning):
            self.app.version()
        os.unlink(self.socket_path)

    def test_restarted_daemon_is_picked_up(self) -> None:
        version = {"version": "0.1.0", "protocolVersion": "1.1", "methods": ["getBrokerVersion"]}
        first = FakeBroker(self.socket_path, lambda request, send: send(_result(request, dict(version, pid=1))))
        self.assertEqual(self.app.version()["pid"], 1)
        first.close()
        with self.assertRaises(bc.BrokerNotRunning):
            self.app.version()
        self.serve(lambda request, send: send(_result(request, dict(version, pid=2))))
        self.assertEqual(self.app.version()["pid"], 2)  # same app object, new daemon

    def test_refusals_while_restarting_are_retried(self) -> None:
        answers = [lambda request: _error(None, -32002, "too many connections or shutting down"),
                   lambda request: _error(request, -32004, "shutting down"),
                   lambda request: _result(request, {"accounts": []})]
        broker = self.serve(lambda request, send: send(answers.pop(0)(request)))
        self.assertEqual(self.app.get_accounts(), [])
        self.assertEqual(broker.methods(), ["getAccounts"] * 3)
        broker.close()
        # A daemon that keeps refusing: the refusal is the answer after a few tries.
        broker = self.serve(lambda request, send: send(_error(request, -32004, "shutting down")))
        with self.assertRaises(bc.BrokerError) as caught:
            self.app.get_accounts()
        self.assertEqual(caught.exception.code, -32004)
        self.assertEqual(len(broker.requests), 4)
        # Other errors are never retried.
        broker.close()
        broker = self.serve(lambda request, send: send(_error(request, -32001, "permission denied")))
        with self.assertRaises(bc.BrokerError):
            self.app.get_accounts()
        self.assertEqual(len(broker.requests), 1)


@unittest.skipUnless(SOCKET, "BROKERD_SOCKET is not set")
class BrokerdClientTest(unittest.TestCase):
    app: bc.PublicClientApplication

    @classmethod
    def setUpClass(cls) -> None:
        cls.app = bc.PublicClientApplication(CLIENT_ID, authority=AUTHORITY, socket_path=SOCKET, timeout=60)

    def test_version_and_status(self) -> None:
        version = self.app.version()
        self.assertTrue(version["protocolVersion"].startswith("1."))
        self.assertIn("acquireTokenInteractively", version["methods"])
        status = self.app.status()
        self.assertEqual(status["version"], version["version"])
        self.assertIsInstance(status["pid"], int)

    def test_invalid_params(self) -> None:
        # silent with scopes=[]: -32602 missingScopes, or -50002 when the account is unknown (resolved first).
        with self.assertRaises(bc.BrokerError) as caught:
            self.app.acquire_token_silent([], "nobody-" + USER)
        self.assertIn(caught.exception.code, (-32602, -50002))
        if caught.exception.code == -32602:
            self.assertEqual(caught.exception.reason, "missingScopes")
        # An unknown flow is refused before anything starts.
        with self.assertRaises(bc.BrokerError) as caught:
            self.app.acquire_token_interactive(SCOPES, flow="carrier-pigeon", on_prompt=lambda kind, params: None)
        self.assertEqual(caught.exception.code, -32602)
        self.assertEqual(caught.exception.reason, "invalidFlow")
        self.assertNotIsInstance(caught.exception, bc.InteractionRequired)
        # Signing out an unknown account: -32602 accountNotFound.
        with self.assertRaises(bc.BrokerError) as caught:
            self.app.sign_out("nobody-at-all@example.invalid")
        self.assertEqual((caught.exception.code, caught.exception.reason), (-32602, "accountNotFound"))
        self.assertIsNone(self.app.get_account(username="nobody-at-all@example.invalid"))

    @unittest.skipUnless(APPROVE_URL, "BROKERD_TEST_APPROVE_URL is not set")
    def test_full_cycle(self) -> None:
        app = self.app
        _sign_out_test_user(app)
        self.addCleanup(_sign_out_test_user, app)

        # 1. No account yet.
        with self.assertRaises(bc.InteractionRequired):
            app.acquire_token_silent(SCOPES, USER)

        # 2. Device code sign-in, approved through the IdP's test endpoint.
        prompts: List[str] = []

        def approve(kind: str, params: Dict[str, Any]) -> None:
            prompts.append(kind)
            self.assertEqual(kind, "deviceCode")
            self.assertTrue(params.get("userCode"))
            self.assertTrue(params.get("requestId"))
            url = APPROVE_URL.replace("{code}", urllib.parse.quote(params["userCode"]))
            with urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=30) as answer:
                self.assertEqual(answer.status, 200)

        interactive = app.acquire_token_interactive(SCOPES, flow="deviceCode", on_prompt=approve, timeout=120)
        self.assertEqual(prompts, ["deviceCode"])
        self.assertEqual(interactive["source"], "interactive")
        self.assertTrue(interactive.get("accessToken"), "no access token")
        self.assertIsInstance(interactive["expiresOn"], int)
        account = interactive["account"]
        self.addCleanup(_sign_out_quietly, app, account["homeAccountId"])
        self.assertTrue(_is_test_user(account), f"signed in as {account.get('username')!r}")
        home = account["homeAccountId"]

        # 3. Silent: from the cache, same token; by username, by homeAccountId and by Account dict.
        for reference in (USER, home, account):
            with self.subTest(account_reference=reference if isinstance(reference, str) else "dict"):
                silent = app.acquire_token_silent(SCOPES, reference)
                self.assertEqual(silent["source"], "cache")
                self.assertTrue(silent["accessToken"] == interactive["accessToken"], "access token differs")
                self.assertEqual(silent["account"]["homeAccountId"], home)

        # Silent with scopes=[] for a known account: -32602 missingScopes.
        with self.assertRaises(bc.BrokerError) as caught:
            app.acquire_token_silent([], account)
        self.assertEqual((caught.exception.code, caught.exception.reason), (-32602, "missingScopes"))

        # force_refresh redeems the refresh token.
        refreshed = app.acquire_token_silent(SCOPES, account, force_refresh=True)
        self.assertEqual(refreshed["source"], "refresh")

        # 4. Accounts.
        listed = app.get_accounts()
        self.assertIn(home, [a["homeAccountId"] for a in listed])
        self.assertEqual([a["homeAccountId"] for a in app.get_accounts(username=account["username"].upper())], [home])
        found = app.get_account(username=account["username"].upper())
        self.assertIsNotNone(found)
        self.assertEqual(found["homeAccountId"], home)
        self.assertEqual(app.get_account(home_account_id=home.upper())["homeAccountId"], home)

        # 5. Remove from this client: hidden, and silent needs interaction.
        removal = app.remove_account(account)
        self.assertEqual(removal["homeAccountId"], home.lower())
        self.assertEqual(removal["removedAccounts"], 0)
        self.assertIsNone(app.get_account(home_account_id=home))
        self.assertNotIn(home, [a["homeAccountId"] for a in app.get_accounts()])
        with self.assertRaises(bc.InteractionRequired):
            app.acquire_token_silent(SCOPES, account)

        # 6. Sign out everywhere: the account is gone for every client.
        signed_out = app.sign_out(home)
        self.assertEqual(signed_out["homeAccountId"], home.lower())
        self.assertGreaterEqual(signed_out["removedAccounts"], 1)
        everyone = app.call("getAccounts").get("accounts", [])
        self.assertNotIn(home.lower(), [a["homeAccountId"].lower() for a in everyone])
        with self.assertRaises(bc.BrokerError) as caught:
            app.sign_out(home)
        self.assertEqual(caught.exception.reason, "accountNotFound")


    def _device_sign_in(self, scopes: List[str], extra: Optional[List[str]] = None) -> Dict[str, Any]:
        """Device-code sign-in of the test user, approved through the IdP; signs out afterwards."""
        result = self.app.acquire_token_interactive(scopes, flow="deviceCode", extra_scopes_to_consent=extra,
                                                    on_prompt=lambda kind, params: _approve_device(params),
                                                    timeout=120)
        self.addCleanup(_sign_out_quietly, self.app, result["account"]["homeAccountId"])
        return result

    @unittest.skipUnless(APPROVE_URL and IDP, "BROKERD_TEST_APPROVE_URL is not set")
    def test_token_errors(self) -> None:
        app = self.app
        _sign_out_test_user(app)
        self.addCleanup(_sign_out_test_user, app)
        self.addCleanup(_idp_control, "/test/reset")  # faults and declined scopes
        account = self._device_sign_in(SCOPES, extra=["mail.read"])["account"]

        # A claims challenge bypasses the access-token cache.
        claimed = app.acquire_token_silent(SCOPES, account, claims={"access_token": {"nbf": {"essential": True}}},
                                           correlation_id="python-client-test")
        self.assertEqual(claimed["source"], "refresh")
        self.assertEqual(claimed["correlationId"], "python-client-test")

        # The IdP refuses the client: ServerError, not retryable; the OAuth error is in data.
        _idp_control("/test/fail-next?status=400&error=invalid_client&grant_type=refresh_token")
        with self.assertRaises(bc.ServerError) as caught:
            app.acquire_token_silent(SCOPES, account, force_refresh=True)
        self.assertEqual(caught.exception.code, -50006)
        self.assertFalse(caught.exception.retryable)
        self.assertEqual(caught.exception.data.get("error"), "invalid_client")

        # The IdP is overloaded (brokerd retries a 503 once): ServerError, retryable.
        _idp_control("/test/fail-next?status=503&count=2&grant_type=refresh_token")
        with self.assertRaises(bc.ServerError) as caught:
            app.acquire_token_silent(SCOPES, account, force_refresh=True)
        self.assertTrue(caught.exception.retryable)
        self.assertEqual(app.acquire_token_silent(SCOPES, account, force_refresh=True)["source"], "refresh")

        # The IdP grants fewer scopes than asked: ServerDeclinedScopes with both lists.
        _idp_control("/test/decline-scope?scope=mail.read")
        with self.assertRaises(bc.ServerDeclinedScopes) as caught:
            app.acquire_token_silent(SCOPES + ["mail.read"], account, force_refresh=True)
        self.assertEqual(caught.exception.code, -50003)
        self.assertEqual(caught.exception.declined_scopes, ["mail.read"])
        self.assertIn("user.read", caught.exception.granted_scopes)

    @unittest.skipUnless(APPROVE_URL and IDP, "BROKERD_TEST_APPROVE_URL is not set")
    def test_user_canceled(self) -> None:
        app = self.app
        _sign_out_test_user(app)

        def deny(kind: str, params: Dict[str, Any]) -> None:
            _idp_control("/test/deny-device?" + urllib.parse.urlencode({"user_code": params["userCode"]}))

        with self.assertRaises(bc.UserCanceled) as caught:
            app.acquire_token_interactive(SCOPES, flow="deviceCode", on_prompt=deny, timeout=120)
        self.assertEqual(caught.exception.code, -50005)

        # A prompt callback that fails cancels the flow: the error comes through, the flow is gone.
        request_ids: List[str] = []

        def give_up(kind: str, params: Dict[str, Any]) -> None:
            request_ids.append(params["requestId"])
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            app.acquire_token_interactive(SCOPES, flow="deviceCode", on_prompt=give_up, timeout=120)
        self.assertEqual(len(request_ids), 1)
        self.assertFalse(app.cancel_interactive_flow(request_ids[0]), "the flow still runs")

    @unittest.skipUnless(BROWSER, "no scripted browser (Tests/idp/fake_browser.py)")
    def test_browser_flow_with_extra_scopes(self) -> None:
        """MSAL's incremental consent: sign in for user.read, consenting to mail.read too; then
        mail.read comes silently."""
        app = self.app
        _sign_out_test_user(app)
        self.addCleanup(_sign_out_test_user, app)
        prompts: List[str] = []

        def browse(kind: str, params: Dict[str, Any]) -> None:
            prompts.append(kind)
            self.assertEqual(kind, "browserUrl")
            environment = dict(os.environ, IDP_USER=USER)
            done = subprocess.run([sys.executable, BROWSER, params["url"]], env=environment, timeout=60,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.assertEqual(done.returncode, 0, "the scripted browser did not deliver the redirect")

        result = app.acquire_token_interactive(SCOPES, extra_scopes_to_consent=["mail.read"], on_prompt=browse,
                                               timeout=120)
        self.addCleanup(_sign_out_quietly, app, result["account"]["homeAccountId"])
        self.assertEqual(prompts, ["browserUrl"])
        self.assertEqual(result["source"], "interactive")
        self.assertTrue(_is_test_user(result["account"]))
        mail = app.acquire_token_silent(["mail.read"], result["account"])
        self.assertIn(mail["source"], ("cache", "refresh"))
        self.assertIn("mail.read", mail["grantedScopes"])
        self.assertEqual(prompts, ["browserUrl"], "no second prompt")


if __name__ == "__main__":
    if not SOCKET:
        print("BROKERD_SOCKET is not set: only the offline tests run.", file=sys.stderr)
    unittest.main()
