import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The client registration the token tests use (a public client of the test IdP).
let testClient = "brokerd-test-app-a"

/// Calls the token tests share.
extension XCTestCase {
    func startBroker(_ idp: TestIdP, https: Bool = false, extra: String = "") throws -> Daemon {
        let daemon = try Daemon(config: idp.brokerConfig(https: https, extra: extra))
        daemon.environment = idp.browserEnvironment()
        try daemon.start()
        return daemon
    }

    func silent(_ connection: BrokerConnection, account: String, scopes: [String] = ["mail.read"],
                forceRefresh: Bool = false) async throws -> TokenResult {
        try await connection.call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: testClient, scopes: scopes, account: AccountReference(account), forceRefresh: forceRefresh ? true : nil),
            as: TokenResult.self)
    }

    func rpcCode(_ body: () async throws -> Void) async -> Int? {
        do { try await body() } catch let BrokerClientError.rpc(error) { return error.code } catch { return nil }
        return nil
    }

    /// Secrets of the cache as exported (only the refresh tokens' secrets).
    func refreshTokens(_ connection: BrokerConnection) async throws -> [String] {
        let exported = try await connection.call(.exportCache, ExportCacheParams(), as: ExportResult.self).data ?? ""
        let root = try JSONSerialization.jsonObject(with: Data(exported.utf8)) as! [String: Any]
        let section = root["RefreshToken"] as? [String: [String: Any]] ?? [:]
        return section.values.compactMap { $0["secret"] as? String }.sorted()
    }
}
