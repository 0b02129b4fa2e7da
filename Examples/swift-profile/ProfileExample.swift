// Sample app 1 of 2 (see Examples/README.md): shows who is signed in, from a profile API, with a token from brokerd.
//
// It asks for `user.read` and, at sign-in, also for consent to `mail.read` (MSAL's extraScopesToConsent), so that the
// second sample app (Examples/python-mail-count), registered under the same client id, gets its mail token silently.

import ArgumentParser
import AsyncHTTPClient
import BrokerClient
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@main
struct ProfileExample: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile-example",
        abstract: "Print the signed-in user's profile, signing in through brokerd only when a silent token is not possible.")

    @Option(name: .customLong("client-id"), help: "The app registration (default: $BROKERD_EXAMPLE_CLIENT_ID).")
    var clientId: String?
    @Option(help: "The authority (default: $BROKERD_EXAMPLE_AUTHORITY, else brokerd's default_authority).")
    var authority: String?
    @Option(help: "Base URL of the profile API serving /api/me (default: $BROKERD_EXAMPLE_API, else the authority).")
    var api: String?
    @Option(help: "Which account, by username, when several are signed in.")
    var account: String?
    @Flag(name: .customLong("device-code"), help: "Sign in with a device code instead of the browser.")
    var deviceCode = false
    @Flag(name: .customLong("no-interactive"), help: "Never sign in: exit 4 when a silent token is not possible.")
    var noInteractive = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let clientId = clientId ?? environment["BROKERD_EXAMPLE_CLIENT_ID"] else {
            throw ValidationError("pass --client-id or set BROKERD_EXAMPLE_CLIENT_ID")
        }
        let authority = authority ?? environment["BROKERD_EXAMPLE_AUTHORITY"]
        guard let api = api ?? environment["BROKERD_EXAMPLE_API"] ?? authority else {
            throw ValidationError("pass --api (or --authority)")
        }
        let app = PublicClientApplication(clientId: clientId, authority: authority)
        do {
            let result = try await token(app)
            let profile = try await fetchProfile(api: api, accessToken: result.accessToken)
            print("Signed in as \(profile["name"] ?? result.account.username) <\(profile["email"] ?? "?")> "
                  + "(username \(profile["username"] ?? result.account.username))")
            print("token source: \(result.source?.rawValue ?? "?")")
        } catch let error as BrokerError {
            FileHandleStandardError.write("profile-example: \(error)")
            switch error {
            case .brokerNotRunning: throw ExitCode(3)
            case .interactionRequired: throw ExitCode(4)
            default: throw ExitCode(1)
            }
        }
    }

    /// MSAL's pattern: silent first; interactive only when the broker says interaction is required.
    func token(_ app: PublicClientApplication) async throws(BrokerError) -> AuthenticationResult {
        let scopes = ["user.read"]
        let accounts = try await app.allAccounts()
        let chosen = account.map { name in accounts.first { $0.username.lowercased() == name.lowercased() } } ?? accounts.first
        if let chosen {
            do { return try await app.acquireTokenSilent(scopes: scopes, account: chosen) } catch .interactionRequired(let detail) {
                if noInteractive { throw .interactionRequired(detail) }
            }
        } else if noInteractive {
            throw .interactionRequired(OAuthErrorDetail(message: "nobody is signed in for \(app.clientId)"))
        }
        return try await app.acquireToken(scopes: scopes, flow: deviceCode ? .deviceCode : .browser,
                                          extraScopesToConsent: ["mail.read"], loginHint: account) { prompt in
            switch prompt {
            case .openBrowser(let url, _): FileHandleStandardError.write("Sign in in your browser: \(url)")
            case .deviceCode(_, _, _, let message, _): FileHandleStandardError.write(message)
            }
        }
    }

    func fetchProfile(api: String, accessToken: String) async throws -> [String: String] {
        var request = HTTPClientRequest(url: api.trimmingSuffix("/") + "/api/me")
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else {
            FileHandleStandardError.write("profile-example: the profile API answered \(response.status.code)")
            throw ExitCode(1)
        }
        let object = try JSONDecoder().decode([String: JSONScalar].self, from: Data(body.readableBytesView))
        return object.compactMapValues(\.text)
    }
}

/// The profile's values, whatever their JSON type.
enum JSONScalar: Decodable {
    case text(String), other

    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let string = try? container.decode(String.self) { self = .text(string) } else { self = .other }
    }

    var text: String? { if case .text(let value) = self { value } else { nil } }
}

enum FileHandleStandardError {
    static func write(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        bytes.withUnsafeMutableBytes { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
