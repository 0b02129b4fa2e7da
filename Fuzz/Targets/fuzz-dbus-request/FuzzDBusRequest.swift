import BrokerJSON

/// A com.microsoft.identity.Broker1 call from any app on the session bus: the checks every request passes before it
/// reaches the broker (Broker1Requests.swift, compiled into this target as it is in BrokerDBus) end without a trap on
/// any method, correlation id and request text; an accepted token request has the keys the translation reads, of
/// their types; and a refusal's reason names a key or a limit, never the request's text.
///
/// Input: the first byte picks the method; the bytes up to the first 0x00 are the correlation id; the rest, as
/// UTF-8 (invalid sequences repaired, as sd-bus would refuse them), is the request JSON.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBusRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let methods = ["acquireTokenSilently", "acquireTokenInteractively", "getAccounts", "removeAccount",
                   "cancelInteractiveFlow", "getLinuxBrokerVersion", "acquirePrtSsoCookie", "generateSignedHttpRequest",
                   "noSuchMethod"]
    let method = methods[Int(selector) % methods.count]
    let rest = bytes.dropFirst()
    let split = rest.firstIndex(of: 0) ?? rest.endIndex
    let correlationId = String(decoding: rest[..<split], as: UTF8.self)
    let request = String(decoding: rest[split...].dropFirst(), as: UTF8.self)

    switch Broker1Requests.validated(method: method, correlationId: correlationId, request: request) {
    case .success(let params):
        if method == "acquireTokenSilently" || method == "acquireTokenInteractively" {
            let auth = params["authParameters"]?.objectValue
            require(auth != nil, "an accepted token request has authParameters")
            require(auth?["clientId"]?.stringValue?.isEmpty == false, "an accepted token request has a clientId")
            if let scopes = auth?["requestedScopes"], case .array(let list) = scopes {
                require(list.allSatisfy { $0.stringValue != nil }, "accepted scopes are strings")
            }
        }
        if method == "getAccounts" || method == "removeAccount" {
            require(params["clientId"]?.stringValue?.isEmpty == false, "an accepted \(method) has a clientId")
        }
    case .failure(let problem):
        require(!problem.reason.isEmpty, "a refusal says why")
        if request.count >= 16, !request.allSatisfy({ $0 == " " }) {
            require(!problem.reason.contains(request), "a refusal's reason never repeats the request")
        }
    }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
