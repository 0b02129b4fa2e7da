#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where brokerd listens and clients connect, resolved the same way by brokerd, brokerctl and BrokerClient:
/// an explicit path, else `$BROKERD_SOCKET`, else `$XDG_RUNTIME_DIR/brokerd/brokerd.sock`
/// (`/run/user/<uid>` when the variable is unset, `/tmp/brokerd-<uid>` when that is not writable either; brokerd
/// refuses a directory another user owns, and clients refuse a socket served by another user).
public enum SocketLocation {
    public static let environmentVariable = "BROKERD_SOCKET"

    public static func resolve(explicit: String? = nil) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment(environmentVariable), !fromEnvironment.isEmpty { return fromEnvironment }
        return "\(runtimeDirectory())/brokerd/brokerd.sock"
    }

    public static func runtimeDirectory() -> String {
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") { return runtime }
        let perUser = "/run/user/\(getuid())"
        if access(perUser, W_OK) == 0 { return perUser }
        return "/tmp/brokerd-\(getuid())"
    }

    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
