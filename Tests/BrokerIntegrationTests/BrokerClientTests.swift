import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The Swift client library (PublicClientApplication, BrokerControl) against the real brokerd and the real test IdP.
final class BrokerClientTests: XCTestCase {

    func testSilentThenInteractionRequiredThenInteractiveThenSilent() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)

        // A fresh app: nobody signed in yet.
        let none = try await app.allAccounts()
        XCTAssertEqual(none, [])

        // Interactive (the daemon's $BROWSER is the scripted browser, which signs in as alice).
        let prompts = PromptRecorder()
        let first = try await app.acquireToken(scopes: scopes) { prompts.add($0) }
        XCTAssertEqual(first.source, .interactive)
        XCTAssertEqual(first.account.username, "alice")
        XCTAssertTrue(first.scopes.contains("mail.read"), "\(first.scopes)")
        XCTAssertGreaterThan(first.expiresOn, Date())
        guard case .openBrowser(let url, let requestId)? = prompts.all.first else {
            return XCTFail("no browser prompt: \(prompts.all)")
        }
        XCTAssertTrue(url.hasPrefix(idp.http + "/authorize/"), url)
        XCTAssertFalse(requestId.isEmpty)

        // Silent: from the cache, then by the refresh token.
        let accounts = try await app.allAccounts()
        let account = try XCTUnwrap(accounts.first)
        let cached = try await app.acquireTokenSilent(scopes: scopes, account: account)
        XCTAssertEqual(cached.source, .cache)
        XCTAssertEqual(cached.accessToken, first.accessToken)
        let refreshed = try await app.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: true)
        XCTAssertEqual(refreshed.source, .refresh)
        XCTAssertNotEqual(refreshed.accessToken, first.accessToken)

        // The IdP revokes the refresh token: silent can no longer work.
        try idp.control("/test/revoke-refresh-tokens?username=alice")
        do {
            _ = try await app.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: true)
            XCTFail("silent succeeded with a revoked refresh token")
        } catch .interactionRequired(let detail) {
            XCTAssertEqual(detail.code, -50002)
            XCTAssertEqual(detail.error, "invalid_grant")
            XCTAssertFalse(detail.message.contains(first.accessToken))
        }
        let flagged = try await app.account(forIdentifier: account.identifier)
        XCTAssertEqual(flagged?.signInRequired, true)

        // MSAL's answer to InteractionRequired: interactive, with the account as login hint; then silent again.
        let again = try await app.acquireToken(scopes: scopes, loginHint: account.username)
        XCTAssertEqual(again.source, .interactive)
        XCTAssertEqual(again.account, account)
        let silentAgain = try await app.acquireTokenSilent(scopes: scopes, account: account)
        XCTAssertEqual(silentAgain.source, .cache)
        XCTAssertEqual(silentAgain.accessToken, again.accessToken)
    }

    func testAccountLookupsAndRemovalArePerApp() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let mail = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let files = PublicClientApplication(clientId: "brokerd-test-app-b", socketPath: daemon.socket)
        let signedIn = try await mail.acquireToken(scopes: scopes).account

        let byId = try await mail.account(forIdentifier: signedIn.identifier)
        XCTAssertEqual(byId?.username, "alice")
        XCTAssertEqual(byId?.environment, signedIn.environment)
        XCTAssertEqual(byId?.accountClaims?.objectValue?["preferred_username"]?.stringValue, "alice")
        let byName = try await mail.account(forUsername: "ALICE")
        XCTAssertEqual(byName, signedIn, "username lookup is case-insensitive")
        let unknownId = try await mail.account(forIdentifier: "no-such-account")
        XCTAssertNil(unknownId)
        let unknownName = try await mail.account(forUsername: "nobody")
        XCTAssertNil(unknownName)

        // Another app of the user sees the same account (SSO) and gets its own token by the refresh token it holds
        // only after its own sign-in; first it must sign in once too (refresh tokens are per client here).
        let shared = try await files.allAccounts()
        XCTAssertEqual(shared, [signedIn])
        _ = try await files.acquireToken(scopes: ["files.read"])

        // Removal from the mail app hides the account from it only.
        try await mail.remove(signedIn)
        let afterRemoval = try await mail.allAccounts()
        XCTAssertEqual(afterRemoval, [])
        let hidden = try await mail.account(forIdentifier: signedIn.identifier)
        XCTAssertNil(hidden)
        do {
            _ = try await mail.acquireTokenSilent(scopes: scopes, account: signedIn)
            XCTFail("silent worked for a removed account")
        } catch .interactionRequired {}
        let stillThere = try await files.acquireTokenSilent(scopes: ["files.read"], account: signedIn)
        XCTAssertEqual(stillThere.source, .cache)

        // Signing out everywhere is BrokerControl's.
        let removal = try await BrokerControl(socketPath: daemon.socket).signOut(signedIn.identifier)
        XCTAssertEqual(removal.homeAccountId, signedIn.identifier)
        let gone = try await files.allAccounts()
        XCTAssertEqual(gone, [])
    }

    func testErrorsAreMSALErrorsWithTheirDetail() async throws {
        // No broker on the socket.
        let nowhere = PublicClientApplication(clientId: testClient, socketPath: NSTemporaryDirectory() + "/no-brokerd-\(getpid()).sock")
        do {
            _ = try await nowhere.allAccounts()
            XCTFail("a call without a broker succeeded")
        } catch .brokerNotRunning(let socket, let reason) {
            XCTAssertTrue(socket.hasSuffix(".sock"))
            XCTAssertFalse(reason.isEmpty)
        }

        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        // Consent to files.read too, so that a refresh may ask for it (incremental consent, MSAL's extraScopesToConsent).
        let account = try await app.acquireToken(scopes: scopes, extraScopesToConsent: ["files.read"]).account

        // A bad request: no scopes.
        do {
            _ = try await app.acquireTokenSilent(scopes: [], account: account)
            XCTFail("silent without scopes succeeded")
        } catch .invalidRequest(let detail) {
            XCTAssertEqual(detail.code, -32602)
            XCTAssertEqual(detail.reason, "missingScopes")
        }

        // ServerDeclinedScopes: the granted scopes are named, and the token for them is cached.
        try idp.control("/test/decline-scope?scope=files.read")
        do {
            _ = try await app.acquireTokenSilent(scopes: ["mail.read", "files.read"], account: account, forceRefresh: true)
            XCTFail("a declined scope was not reported")
        } catch .serverDeclinedScopes(let granted, let declined, let detail) {
            XCTAssertEqual(declined, ["files.read"])
            XCTAssertTrue(granted.contains("mail.read"), "\(granted)")
            XCTAssertEqual(detail.code, -50003)
        }

        // ServerError, retryable: the IdP answers 503 twice (brokerd retries once).
        try idp.control("/test/fail-next?status=503&count=2&grant_type=refresh_token")
        do {
            _ = try await app.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: true)
            XCTFail("an IdP outage was not reported")
        } catch .serverError(let detail) {
            XCTAssertEqual(detail.code, -50006)
            XCTAssertTrue(detail.retryable)
        }

        // UserCanceled: cancelling the calling task ends the sign-in at the broker (device code never entered).
        let waiting = PromptRecorder()
        let signIn = Task { try await app.acquireToken(scopes: scopes, flow: .deviceCode) { waiting.add($0) } }
        try await waitFor { !waiting.all.isEmpty }
        guard case .deviceCode(let userCode, let uri, _, let message, _)? = waiting.all.first else {
            return XCTFail("no device code prompt: \(waiting.all)")
        }
        XCTAssertTrue(message.contains(userCode) && uri.hasPrefix(idp.http), message)
        // The shared connection is gone (closed for idleness, say): the cancel travels on the sign-in's own.
        await app.close()
        signIn.cancel()
        do {
            _ = try await signIn.value
            XCTFail("a cancelled sign-in succeeded")
        } catch BrokerError.userCanceled(let detail) {
            XCTAssertEqual(detail?.code, -50005, "brokerd itself answered UserCanceled")
        }
        let status = try await BrokerControl(socketPath: daemon.socket).status()
        XCTAssertEqual(status.problems, [])
        // The broker is free for the next sign-in of this client (the cancelled one is over).
        let next = try await app.acquireToken(scopes: scopes)
        XCTAssertEqual(next.source, .interactive)
    }

    func testASignInWhoseAppWentAwayIsCanceled() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        // An app starts a device-code sign-in and exits before the user enters the code.
        do {
            let gone = try RawClient(daemon.socket, receiveTimeout: 30)
            try gone.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"flow":"deviceCode"}}"# + "\n")
            XCTAssertEqual(try gone.readMessage()["method"] as? String, "deviceCode")
        }
        // The broker frees the app's sign-in slot at once (not after interactive_timeout, 60 s here).
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        var result: AuthenticationResult?
        for _ in 0..<100 where result == nil {
            do { result = try await app.acquireToken(scopes: ["mail.read"]) } catch .invalidRequest(let detail) {
                XCTAssertEqual(detail.reason, "interactiveFlowRunning")
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        XCTAssertEqual(result?.source, .interactive, daemon.log)
    }

    func testSilentCallsRunWhileASignInWaitsOnTheSameApplication() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let account = try await app.acquireToken(scopes: scopes).account

        let prompts = PromptRecorder()
        let signIn = Task { try await app.acquireToken(scopes: ["user.read"], flow: .deviceCode) { prompts.add($0) } }
        try await waitFor { !prompts.all.isEmpty }
        // 50 silent calls at once on the same application object, answered while the sign-in still waits.
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await app.acquireTokenSilent(scopes: scopes, account: account).accessToken } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        XCTAssertEqual(tokens.count, 1)
        // Now approve the device code: the sign-in completes.
        guard case .deviceCode(let userCode, _, _, _, _)? = prompts.all.first else { return XCTFail("\(prompts.all)") }
        try idp.control("/test/approve-device?user_code=\(userCode)&username=alice")
        let result = try await signIn.value
        XCTAssertEqual(result.source, .interactive)
        XCTAssertTrue(result.scopes.contains("user.read"), "\(result.scopes)")
    }

    func testTheSameApplicationGoesOnAfterTheDaemonRestarts() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let first = try await app.acquireToken(scopes: scopes)
        let account = first.account

        XCTAssertEqual(daemon.stop(), 0)
        do {
            _ = try await app.acquireTokenSilent(scopes: scopes, account: account)
            XCTFail("a call without the daemon succeeded")
        } catch .brokerNotRunning {}

        try daemon.start()
        let afterRestart = try await app.acquireTokenSilent(scopes: scopes, account: account)
        XCTAssertEqual(afterRestart.source, .cache, "the cache survived the restart")
        XCTAssertEqual(afterRestart.accessToken, first.accessToken)

        // A restart between two calls on an open connection: the next call reconnects by itself.
        let events = try await BrokerControl(socketPath: daemon.socket).events()
        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        let again = try await app.acquireTokenSilent(scopes: scopes, account: account)
        XCTAssertEqual(again.accessToken, first.accessToken)
        // An event subscription ends with the connection it lives on.
        do {
            for try await _ in events {}
            XCTFail("the event stream outlived the daemon")
        } catch BrokerError.connection {}
    }

    func testTokensOfDifferentScopesDoNotEvictEachOther() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let account = try await app.acquireToken(scopes: ["user.read"], extraScopesToConsent: ["mail.read"]).account
        // One token per resource scope; each carries openid/profile/offline_access too (as most IdPs send them).
        let mail = try await app.acquireTokenSilent(scopes: ["mail.read"], account: account, forceRefresh: true)
        let profile = try await app.acquireTokenSilent(scopes: ["user.read"], account: account, forceRefresh: true)
        try idp.control("/test/reset-counters")
        let mailAgain = try await app.acquireTokenSilent(scopes: ["mail.read"], account: account)
        let profileAgain = try await app.acquireTokenSilent(scopes: ["user.read"], account: account)
        XCTAssertEqual(mailAgain.source, .cache)
        XCTAssertEqual(mailAgain.accessToken, mail.accessToken)
        XCTAssertEqual(profileAgain.source, .cache)
        XCTAssertEqual(profileAgain.accessToken, profile.accessToken)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0)
    }

    func testConcurrentFirstCallsShareOneConnectionAndResultsHideTheirTokens() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await app.allAccounts().count } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(counts, Array(repeating: 0, count: 8))
        let status = try await BrokerControl(socketPath: daemon.socket).status()
        XCTAssertEqual(status.connections, 2, "one for the app's eight first calls, one for this status call")

        let result = try await app.acquireToken(scopes: ["mail.read"])
        var dumped = ""
        dump(result, to: &dumped)
        for text in ["\(result)", String(reflecting: result), dumped, "\(result.wire)"] {
            XCTAssertFalse(text.contains(result.accessToken), text)
            XCTAssertTrue(text.contains("<redacted>"), text)
        }
        do {
            _ = try await BrokerControl(socketPath: daemon.socket).events([.browserUrl])
            XCTFail("a prompt was accepted as an event")
        } catch .invalidRequest(let detail) {
            XCTAssertEqual(detail.code, -32602)
        }
    }

    func testTheSignInAsAnAsyncSequence() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        var steps: [String] = []
        var token: AuthenticationResult?
        for try await step in app.acquireTokenEvents(scopes: ["mail.read"]) {
            switch step {
            case .prompt(.openBrowser(let url, _)): steps.append(url.hasPrefix(idp.http) ? "browser" : "wrong url")
            case .prompt(.deviceCode): steps.append("device code")
            case .completed(let result):
                steps.append("completed")
                token = result
            }
        }
        XCTAssertEqual(steps, ["browser", "completed"])
        XCTAssertEqual(token?.source, .interactive)
    }

    func testEventsReachASubscriber() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let scopes = ["mail.read"]
        let control = BrokerControl(socketPath: daemon.socket)
        let events = try await control.events([.accountAdded, .accountRemoved])
        let app = PublicClientApplication(clientId: testClient, socketPath: daemon.socket)
        let account = try await app.acquireToken(scopes: scopes).account
        try await app.remove(account)

        var seen: [BrokerEvent] = []
        for try await event in events {
            seen.append(event)
            if seen.count == 2 { break }
        }
        XCTAssertEqual(seen.map(\.kind), [.accountAdded, .accountRemoved])
        XCTAssertEqual(seen.map(\.homeAccountId), [account.identifier, account.identifier])
        XCTAssertEqual(seen.last?.clientId, testClient)
    }

    private func waitFor(timeout: TimeInterval = 20, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw RawClient.Failure.timeout }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}

/// Prompts as they arrive on the client's notification thread.
final class PromptRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var prompts: [InteractivePrompt] = []
    func add(_ prompt: InteractivePrompt) { lock.withLock { prompts.append(prompt) } }
    var all: [InteractivePrompt] { lock.withLock { prompts } }
}
