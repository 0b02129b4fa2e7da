import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// One secret in the freedesktop Secret Service (org.freedesktop.secrets: gnome-keyring, KWallet, KeePassXC),
/// found by its attributes. Every operation opens a session bus connection of its own and closes it.
///
/// The session is "plain": the secret crosses the user's own session bus unencrypted, which only the user's
/// processes (and root) can connect to; docs/security.md says why that is acceptable.
public struct SecretServiceKeyring: Sendable {
    public static let busName = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"
    static let service = "org.freedesktop.Secret.Service"
    static let item = "org.freedesktop.Secret.Item"
    static let collection = "org.freedesktop.Secret.Collection"
    static let prompt = "org.freedesktop.Secret.Prompt"

    /// What finds the item (and nothing else's).
    public let attributes: [String: String]
    public let label: String
    /// How long an unlock prompt may take before start gives up (the service's dialog is then dismissed).
    public let promptSeconds: UInt64

    public init(attributes: [String: String], label: String, promptSeconds: UInt64 = 30) {
        self.attributes = attributes
        self.label = label
        self.promptSeconds = promptSeconds
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        case bus(BusFailure)
        case noDefaultCollection(program: String)
        /// `dismissed`: the user said no; otherwise nobody answered the prompt in time (or it could not be shown).
        case locked(what: String, program: String, dismissed: Bool, seconds: UInt64)

        public var description: String {
            switch self {
            case .bus(let failure):
                return "the Secret Service: \(failure.description)"
            case .noDefaultCollection(let program):
                return "the Secret Service (\(program)) has no default collection to keep the key in; "
                    + "create one (for example with seahorse) or set key_store = \"file\""
            case .locked(let what, let program, let dismissed, let seconds):
                return "the Secret Service's \(what) is locked and was not unlocked ("
                    + (dismissed ? "the unlock prompt was dismissed" : "no answer to the unlock prompt within \(seconds) s")
                    + "); unlock it in \(program) and start brokerd again, or set key_store = \"file\""
            }
        }
    }

    // MARK: Reachability

    public enum Reachability: Sendable, Equatable {
        /// Owned now by `program` (its executable's name, when the bus tells).
        case running(program: String?)
        /// Nobody owns it, but the bus starts its service on first use.
        case activatable
        case unreachable(why: String)
    }

    /// Whether a Secret Service is on the session bus, without starting one.
    public static func reachability() -> Reachability {
        let connection: BusConnection
        do { connection = try BusConnection() } catch { return .unreachable(why: error.description) }
        let state = connection.nameState(busName)
        if state.owned { return .running(program: connection.ownerProgram(of: busName)) }
        if state.activatable { return .activatable }
        return .unreachable(why: "\(busName) is neither owned nor activatable")
    }

    // MARK: Inspection

    /// What the service holds for these attributes, and whether it could take the secret now.
    public struct Inspection: Sendable {
        public var program: String
        public var holdsSecret: Bool
        /// Why it cannot take a new secret without the user (nil: it can).
        public var cannotStore: String?
    }

    /// Starts the service if it is activatable; never prompts.
    public func inspect() throws(Failure) -> Inspection {
        try withSession { session throws(Failure) in
            let found = try search(session)
            let collection = try defaultCollection(session)
            var cannotStore: String?
            if collection == nil {
                cannotStore = "it has no default collection"
            } else if try isLocked(session, collection!) {
                cannotStore = "its default collection is locked"
            }
            return Inspection(program: session.program, holdsSecret: !(found.unlocked.isEmpty && found.locked.isEmpty),
                              cannotStore: cannotStore)
        }
    }

    /// The executable's name of the service (after it was started), for status.
    public func program() throws(Failure) -> String { try withSession { $0.program } }

    // MARK: The secret

    /// The secret, or nil when the service holds none. A locked item is unlocked first (a prompt, bounded).
    public func read() throws(Failure) -> [UInt8]? {
        try withSession { session throws(Failure) in
            var found = try search(session)
            if found.unlocked.isEmpty, !found.locked.isEmpty {
                try unlock(found.locked, what: "item \"\(label)\"", session)
                found = try search(session)
            }
            guard let path = found.unlocked.first else { return nil }
            return try wrap { () throws(BusFailure) -> [UInt8] in
                let reply = try session.connection.call(Self.busName, path, Self.item, "GetSecret", sensitive: true) { m throws(BusFailure) in
                    try m.append(objectPath: session.path)
                }
                try reply.enter("r", "oayays")
                _ = try reply.readObjectPath()
                _ = try reply.readBytes()
                let value = try reply.readBytes()
                _ = try reply.readString()  // content type
                try reply.exit()
                return value
            }
        }
    }

    /// Stores the secret in the default collection, replacing an item of the same attributes there.
    public func store(_ secret: [UInt8]) throws(Failure) {
        try withSession { session throws(Failure) in
            guard let collection = try defaultCollection(session) else { throw .noDefaultCollection(program: session.program) }
            if try isLocked(session, collection) { try unlock([collection], what: "default collection", session) }
            let (item, prompt) = try wrap { () throws(BusFailure) -> (String, String) in
                let reply = try session.connection.call(Self.busName, collection, Self.collection, "CreateItem", sensitive: true) {
                    m throws(BusFailure) in
                    try m.open("a", "{sv}")
                    try m.open("e", "sv")
                    try m.append("org.freedesktop.Secret.Item.Label")
                    try m.open("v", "s")
                    try m.append(label)
                    try m.close()
                    try m.close()
                    try m.open("e", "sv")
                    try m.append("org.freedesktop.Secret.Item.Attributes")
                    try m.open("v", "a{ss}")
                    try m.append(dictionary: attributes)
                    try m.close()
                    try m.close()
                    try m.close()
                    try m.open("r", "oayays")
                    try m.append(objectPath: session.path)
                    try m.append(bytes: [])
                    try m.append(bytes: secret)
                    try m.append("application/octet-stream")
                    try m.close()
                    try m.append(true)
                }
                return (try reply.readObjectPath(), try reply.readObjectPath())
            }
            if item == "/" && prompt != "/" {
                let dismissed = try runPrompt(prompt, session)
                if dismissed != false {
                    throw .locked(what: "default collection", program: session.program, dismissed: dismissed == true,
                                  seconds: promptSeconds)
                }
            }
        }
    }

    /// Deletes every item of these attributes (unlocking them first if needed).
    public func delete() throws(Failure) {
        try withSession { session throws(Failure) in
            var found = try search(session)
            if !found.locked.isEmpty {
                try unlock(found.locked, what: "item \"\(label)\"", session)
                found = try search(session)
            }
            for path in found.unlocked {
                let prompt = try wrap { () throws(BusFailure) -> String in
                    try session.connection.call(Self.busName, path, Self.item, "Delete").readObjectPath()
                }
                if prompt != "/", try runPrompt(prompt, session) != false {
                    throw .locked(what: "item \"\(label)\"", program: session.program, dismissed: true, seconds: promptSeconds)
                }
            }
        }
    }

    // MARK: Protocol steps

    struct Session {
        let connection: BusConnection
        let path: String
        let program: String
    }

    private func withSession<T>(_ body: (Session) throws(Failure) -> T) throws(Failure) -> T {
        let session = try wrap { () throws(BusFailure) -> Session in
            let connection = try BusConnection()
            let reply = try connection.call(Self.busName, Self.servicePath, Self.service, "OpenSession") { m throws(BusFailure) in
                try m.append("plain")
                try m.open("v", "s")
                try m.append("")
                try m.close()
            }
            try reply.skip("v")
            let path = try reply.readObjectPath()
            return Session(connection: connection, path: path,
                           program: connection.ownerProgram(of: Self.busName) ?? Self.busName)
        }
        defer { _ = try? session.connection.call(Self.busName, session.path, "org.freedesktop.Secret.Session", "Close") }
        return try body(session)
    }

    private func search(_ session: Session) throws(Failure) -> (unlocked: [String], locked: [String]) {
        try wrap { () throws(BusFailure) -> (unlocked: [String], locked: [String]) in
            let reply = try session.connection.call(Self.busName, Self.servicePath, Self.service, "SearchItems") { m throws(BusFailure) in
                try m.append(dictionary: attributes)
            }
            return (try reply.readObjectPaths(), try reply.readObjectPaths())
        }
    }

    private func defaultCollection(_ session: Session) throws(Failure) -> String? {
        let path = try wrap { () throws(BusFailure) -> String in
            try session.connection.call(Self.busName, Self.servicePath, Self.service, "ReadAlias") { m throws(BusFailure) in
                try m.append("default")
            }.readObjectPath()
        }
        return path == "/" ? nil : path
    }

    private func isLocked(_ session: Session, _ collection: String) throws(Failure) -> Bool {
        try wrap { () throws(BusFailure) -> Bool in
            let reply = try session.connection.call(Self.busName, collection, "org.freedesktop.DBus.Properties", "Get") { m throws(BusFailure) in
                try m.append(Self.collection)
                try m.append("Locked")
            }
            try reply.enter("v", "b")
            return try reply.readBool()
        }
    }

    /// Unlock, showing the service's prompt when it needs one and waiting for it at most `promptSeconds`.
    private func unlock(_ paths: [String], what: String, _ session: Session) throws(Failure) {
        let prompt = try wrap { () throws(BusFailure) -> String in
            let reply = try session.connection.call(Self.busName, Self.servicePath, Self.service, "Unlock") { m throws(BusFailure) in
                try m.open("a", "o")
                for path in paths { try m.append(objectPath: path) }
                try m.close()
            }
            _ = try reply.readObjectPaths()
            return try reply.readObjectPath()
        }
        guard prompt != "/" else { return }
        let dismissed = try runPrompt(prompt, session)
        if dismissed != false {
            throw .locked(what: what, program: session.program, dismissed: dismissed == true, seconds: promptSeconds)
        }
    }

    /// Shows a prompt and waits for its Completed signal: whether it was dismissed, nil when it did not complete in
    /// time (it is then dismissed, so no dialog stays behind).
    private func runPrompt(_ path: String, _ session: Session) throws(Failure) -> Bool? {
        let outcome = PromptOutcome()
        let box = Unmanaged.passRetained(outcome)
        defer { box.release() }
        var slot: OpaquePointer?
        try wrap { () throws(BusFailure) in
            try check(sd_bus_match_signal(session.connection.bus, &slot, nil, path, Self.prompt, "Completed", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                let outcome = Unmanaged<PromptOutcome>.fromOpaque(userdata).takeUnretainedValue()
                var dismissed: Int32 = 1
                _ = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &dismissed)
                outcome.dismissed = dismissed != 0
                return 0
            }, box.toOpaque()), "watching the prompt")
        }
        defer { sd_bus_slot_unref(slot) }
        try wrap { () throws(BusFailure) in
            _ = try session.connection.call(Self.busName, path, Self.prompt, "Prompt") { m throws(BusFailure) in try m.append("") }
            try session.connection.process(until: monotonicMicroseconds() + promptSeconds * 1_000_000) { outcome.dismissed != nil }
        }
        if outcome.dismissed == nil { _ = try? session.connection.call(Self.busName, path, Self.prompt, "Dismiss") }
        return outcome.dismissed
    }

    private func wrap<T>(_ body: () throws(BusFailure) -> T) throws(Failure) -> T {
        do { return try body() } catch { throw .bus(error) }
    }
}

private final class PromptOutcome {
    var dismissed: Bool?
}
