import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus failure: the bus could not be reached, or a call came back with an error.
public struct BusFailure: Error, CustomStringConvertible, Sendable {
    /// The D-Bus error name (org.freedesktop.DBus.Error.ServiceUnknown …), when the bus answered with one.
    public var name: String?
    public var description: String
}

/// A session bus connection of its own (sd-bus objects belong to one thread; the D-Bus front end keeps its own).
/// One is opened per key store operation and closed after it, so that nothing is shared between threads.
final class BusConnection {
    let bus: OpaquePointer

    /// Connects to the user's session bus ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus).
    init() throws(BusFailure) {
        var bus: OpaquePointer?
        let r = sd_bus_open_user(&bus)
        guard r >= 0, let bus else { throw BusFailure(name: nil, description: "cannot connect to the session bus: \(errnoText(r))") }
        self.bus = bus
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Whether `name` has an owner now, and whether the bus would start one on demand.
    func nameState(_ name: String) -> (owned: Bool, activatable: Bool) {
        var acquired: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        var activatable: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard sd_bus_list_names(bus, &acquired, &activatable) >= 0 else { return (false, false) }
        defer {
            strv_free(acquired)
            strv_free(activatable)
        }
        return (contains(acquired, name), contains(activatable, name))
    }

    /// The executable's file name of the current owner of `name` (gnome-keyring-daemon, kwalletd6, keepassxc …).
    func ownerProgram(of name: String) -> String? {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_EXE | SD_BUS_CREDS_COMM | SD_BUS_CREDS_AUGMENT), &creds) >= 0,
              let creds else { return nil }
        defer { sd_bus_creds_unref(creds) }
        var text: UnsafePointer<CChar>?
        if sd_bus_creds_get_exe(creds, &text) >= 0, let text {
            return String(String(cString: text).split(separator: "/").last ?? "")
        }
        if sd_bus_creds_get_comm(creds, &text) >= 0, let text { return String(cString: text) }
        return nil
    }

    /// A method call: `build` appends the arguments; the reply is returned for reading.
    func call(_ destination: String, _ path: String, _ interface: String, _ member: String,
              sensitive: Bool = false, build: (BusMessage) throws(BusFailure) -> Void = { _ in }) throws(BusFailure) -> BusMessage {
        var raw: OpaquePointer?
        try check(sd_bus_message_new_method_call(bus, &raw, destination, path, interface, member), "\(member)")
        let message = BusMessage(raw!)
        if sensitive { _ = sd_bus_message_sensitive(raw) }
        try build(message)
        var error = sd_bus_error()
        var reply: OpaquePointer?
        let r = sd_bus_call(bus, raw, 0, &error, &reply)
        defer { sd_bus_error_free(&error) }
        guard r >= 0, let reply else {
            let name = error.name.map { String(cString: $0) }
            let text = error.message.map { String(cString: $0) } ?? errnoText(r)
            throw BusFailure(name: name, description: "\(interface).\(member) failed: \(text)")
        }
        if sensitive { _ = sd_bus_message_sensitive(reply) }
        return BusMessage(reply)
    }

    /// Runs the connection until `done` says so or `deadline` (CLOCK_MONOTONIC microseconds) passes.
    func process(until deadline: UInt64, done: () -> Bool) throws(BusFailure) {
        while !done() {
            let r = sd_bus_process(bus, nil)
            try check(r, "processing the bus")
            if r > 0 { continue }
            let now = monotonicMicroseconds()
            if now >= deadline { return }
            let w = sd_bus_wait(bus, deadline - now)
            if w < 0 && w != -EINTR { try check(w, "waiting on the bus") }
        }
    }

    private func contains(_ list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ name: String) -> Bool {
        guard var cursor = list else { return false }
        while let entry = cursor.pointee {
            if String(cString: entry) == name { return true }
            cursor += 1
        }
        return false
    }

    private func strv_free(_ list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) {
        guard let list else { return }
        var cursor = list
        while let entry = cursor.pointee {
            free(entry)
            cursor += 1
        }
        free(list)
    }
}

func check(_ r: Int32, _ what: String) throws(BusFailure) {
    if r < 0 { throw BusFailure(name: nil, description: "\(what): \(errnoText(r))") }
}

func errnoText(_ r: Int32) -> String { String(cString: strerror(-r)) }

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
}

/// A message being built or read. Reading follows the signature in order, as sd-bus does.
final class BusMessage {
    let raw: OpaquePointer

    init(_ raw: OpaquePointer) { self.raw = raw }
    deinit { sd_bus_message_unref(raw) }

    // MARK: Building

    func append(_ text: String) throws(BusFailure) {
        try check(text.withCString { sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "s")), $0) }, "appending a string")
    }

    func append(objectPath: String) throws(BusFailure) {
        try check(objectPath.withCString { sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "o")), $0) }, "appending a path")
    }

    func append(_ flag: Bool) throws(BusFailure) {
        var value: Int32 = flag ? 1 : 0
        try check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "b")), &value), "appending a boolean")
    }

    func append(bytes: [UInt8]) throws(BusFailure) {
        try check(bytes.withUnsafeBytes { sd_bus_message_append_array(raw, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count) },
                  "appending bytes")
    }

    /// An `a{ss}`.
    func append(dictionary: [String: String]) throws(BusFailure) {
        try open("a", "{ss}")
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            try open("e", "ss")
            try append(key)
            try append(value)
            try close()
        }
        try close()
    }

    func open(_ type: Character, _ contents: String) throws(BusFailure) {
        try check(sd_bus_message_open_container(raw, CChar(type.asciiValue!), contents), "opening \(type)\(contents)")
    }

    func close() throws(BusFailure) { try check(sd_bus_message_close_container(raw), "closing a container") }

    // MARK: Reading

    func readString() throws(BusFailure) -> String {
        var text: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "s")), &text), "reading a string")
        return text.map { String(cString: $0) } ?? ""
    }

    func readObjectPath() throws(BusFailure) -> String {
        var text: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "o")), &text), "reading an object path")
        return text.map { String(cString: $0) } ?? "/"
    }

    func readBool() throws(BusFailure) -> Bool {
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "b")), &value), "reading a boolean")
        return value != 0
    }

    func readBytes() throws(BusFailure) -> [UInt8] {
        var pointer: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(raw, CChar(UInt8(ascii: "y")), &pointer, &size), "reading bytes")
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    /// An `ao`.
    func readObjectPaths() throws(BusFailure) -> [String] {
        try enter("a", "o")
        var paths: [String] = []
        while sd_bus_message_at_end(raw, 0) == 0 { paths.append(try readObjectPath()) }
        try exit()
        return paths
    }

    func enter(_ type: Character, _ contents: String) throws(BusFailure) {
        let r = sd_bus_message_enter_container(raw, CChar(type.asciiValue!), contents)
        if r == 0 { throw BusFailure(name: nil, description: "the reply has no \(type)\(contents) here") }
        try check(r, "entering \(type)\(contents)")
    }

    func exit() throws(BusFailure) { try check(sd_bus_message_exit_container(raw), "leaving a container") }

    func skip(_ signature: String) throws(BusFailure) { try check(sd_bus_message_skip(raw, signature), "skipping \(signature)") }
}
