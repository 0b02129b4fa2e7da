"""End-to-end test of brokerd_client against a REAL running brokerd and test IdP.

Environment:
  BROKERD_SOCKET            brokerd's socket (unset: the tests are skipped, exit 0)
  BROKERD_TEST_CLIENT_ID    client id (default brokerd-test-app-a)
  BROKERD_TEST_AUTHORITY    the IdP's http issuer (default: brokerd's default_authority)
  BROKERD_TEST_APPROVE_URL  URL template to POST to approve a device code, with {code}, e.g.
                            http://127.0.0.1:PORT/test/approve-device?user_code={code}&username=alice
  BROKERD_TEST_USER         user to sign in (default alice)

Run: python3 test_client.py [-v]. Signs the test user out of brokerd before and after.
Never prints a token.
"""

from __future__ import annotations

import os
import sys
import tempfile
import unittest
import urllib.parse
import urllib.request
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import brokerd_client as bc  # noqa: E402

SOCKET = os.environ.get("BROKERD_SOCKET", "")
CLIENT_ID = os.environ.get("BROKERD_TEST_CLIENT_ID", "brokerd-test-app-a")
AUTHORITY = os.environ.get("BROKERD_TEST_AUTHORITY") or None
APPROVE_URL = os.environ.get("BROKERD_TEST_APPROVE_URL", "")
USER = os.environ.get("BROKERD_TEST_USER", "alice")
SCOPES = ["user.read"]


def _is_test_user(account: Dict[str, Any]) -> bool:
    username = str(account.get("username", "")).casefold()
    return username == USER.casefold() or username.split("@")[0] == USER.casefold()


def _sign_out_test_user(app: bc.PublicClientApplication) -> None:
    """Remove every account of the test user, for every client (getAccounts without clientId)."""
    for account in app.call("getAccounts").get("accounts", []):
        if _is_test_user(account):
            app.sign_out(account)


def _sign_out_quietly(app: bc.PublicClientApplication, home_account_id: str) -> None:
    """Cleanup: sign out whoever signed in, even if it was not the test user."""
    try:
        app.sign_out(home_account_id)
    except bc.BrokerError:
        pass


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

    def test_broker_not_running(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            app = bc.PublicClientApplication(CLIENT_ID, socket_path=os.path.join(directory, "nobody.sock"), timeout=5)
            with self.assertRaises(bc.BrokerNotRunning) as caught:
                app.get_accounts()
        self.assertIsInstance(caught.exception, bc.BrokerError)
        self.assertIn("systemctl --user start brokerd.socket", str(caught.exception))

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


if __name__ == "__main__":
    if not SOCKET:
        print("BROKERD_SOCKET is not set: skipping the brokerd end-to-end tests.")
        sys.exit(0)
    unittest.main()
