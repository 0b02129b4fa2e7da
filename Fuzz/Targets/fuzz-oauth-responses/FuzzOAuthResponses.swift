import BrokerJSON
import OAuthParsing

/// An identity provider's answer body, read as each kind of answer: every parser ends in a value or an
/// OAuthFailure, and the numbers it keeps are within their clamps whatever the body says.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOAuthResponses(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    if let token = try? TokenResponse(json: body) {
        let lifetimes = [token.expiresIn, token.extExpiresIn ?? 0, token.refreshIn ?? 0]
        require(lifetimes.allSatisfy { (0...TokenResponse.maxLifetimeSeconds).contains($0) }, "an unclamped lifetime")
        require(!token.accessToken.isEmpty)
    }
    if let device = try? DeviceAuthorization(body) {
        require((1...DeviceAuthorization.maxInterval).contains(device.interval), "an unclamped interval")
        require((1...DeviceAuthorization.maxExpiresIn).contains(device.expiresIn), "an unclamped expires_in")
    }
    if let metadata = try? ProviderMetadata(json: body, source: "https://idp.example/.well-known/openid-configuration") {
        require(!metadata.issuer.isEmpty && !metadata.tokenEndpoint.isEmpty)
    }
    for status in [400, 401, 429, 500, 503] {
        if let error = OAuthErrorResponse(json: body, httpStatus: status) {
            _ = error.description
            _ = OAuthFailure.oauth(error).description
        }
    }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
