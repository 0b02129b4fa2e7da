import Foundation

/// MSAL unified-cache documents made up for tests (fake secrets, fake ids), in msal-python's layout.
struct CacheFixture {
    struct Grant {
        var homeAccountId: String
        var username: String
        var clientId: String
        var scopes: String
        var environment = "login.microsoftonline.com"
        var familyId: String?
        var secretTag: String
    }

    var grants: [Grant]
    var extraTopLevel: String? = nil

    static let alice = "00000000-0000-0000-0000-0000000a11ce.72f988bf-0000-0000-0000-000000000001"
    static let bob = "00000000-0000-0000-0000-000000000b0b.72f988bf-0000-0000-0000-000000000001"

    /// Alice signed in to two apps (A with a family refresh token, B with its own), Bob to app A.
    static var twoAppsTwoAccounts: CacheFixture {
        CacheFixture(grants: [
            Grant(homeAccountId: alice, username: "Alice@Contoso.example", clientId: "client-a",
                  scopes: "User.Read", familyId: "1", secretTag: "alice-a"),
            Grant(homeAccountId: alice, username: "Alice@Contoso.example", clientId: "client-b",
                  scopes: "Mail.Read", secretTag: "alice-b"),
            Grant(homeAccountId: bob, username: "bob@contoso.example", clientId: "client-a",
                  scopes: "User.Read", secretTag: "bob-a"),
        ])
    }

    var json: String {
        var at: [String] = [], rt: [String] = [], idt: [String] = [], accounts: [String: String] = [:]
        for g in grants {
            let realm = String(g.homeAccountId.split(separator: ".").last!)
            let base = "\(g.homeAccountId)-\(g.environment)"
            at.append("""
                "\(base)-accesstoken-\(g.clientId)-\(realm)-\(g.scopes.lowercased())": {"credential_type": "AccessToken", \
                "secret": "fake-at-\(g.secretTag)", "home_account_id": "\(g.homeAccountId)", "environment": "\(g.environment)", \
                "client_id": "\(g.clientId)", "target": "\(g.scopes)", "realm": "\(realm)", "token_type": "Bearer", \
                "cached_at": "1700000000", "expires_on": "4000000000", "extended_expires_on": "4000000000"}
                """)
            rt.append("""
                "\(base)-refreshtoken-\(g.clientId)--": {"credential_type": "RefreshToken", "secret": "fake-rt-\(g.secretTag)", \
                "home_account_id": "\(g.homeAccountId)", "environment": "\(g.environment)", "client_id": "\(g.clientId)"\
                \(g.familyId.map { ", \"family_id\": \"\($0)\"" } ?? ""), "last_modification_time": "1700000000"}
                """)
            idt.append("""
                "\(base)-idtoken-\(g.clientId)-\(realm)-": {"credential_type": "IdToken", "secret": "fake-idt-\(g.secretTag)", \
                "home_account_id": "\(g.homeAccountId)", "environment": "\(g.environment)", "client_id": "\(g.clientId)", "realm": "\(realm)"}
                """)
            accounts["\(base)-\(realm)"] = """
                "\(base)-\(realm)": {"home_account_id": "\(g.homeAccountId)", "environment": "\(g.environment)", "realm": "\(realm)", \
                "local_account_id": "\(g.homeAccountId.split(separator: ".")[0])", "username": "\(g.username)", "authority_type": "MSSTS"}
                """
        }
        var sections = [
            "\"AccessToken\": {\(at.joined(separator: ", "))}",
            "\"RefreshToken\": {\(rt.joined(separator: ", "))}",
            "\"IdToken\": {\(idt.joined(separator: ", "))}",
            "\"Account\": {\(accounts.keys.sorted().map { accounts[$0]! }.joined(separator: ", "))}",
            "\"AppMetadata\": {}",
        ]
        if let extraTopLevel { sections.append(extraTopLevel) }
        return "{\(sections.joined(separator: ",\n"))}"
    }
}
