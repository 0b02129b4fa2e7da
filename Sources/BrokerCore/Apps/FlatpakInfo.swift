/// The parts of a Flatpak sandbox's `/.flatpak-info` (a GLib key file) that say which app it is and whether it can
/// reach past its sandbox. Input from another process: parsed strictly, never trusted beyond what it proves.
struct FlatpakInfo: Equatable {
    var appId: String
    var instanceId: String
    /// Why the app can run code on the host (then it is not told apart from a host process), or nil.
    var hostAccess: String?

    static func parse(_ bytes: [UInt8]) -> Result<FlatpakInfo, FlatpakInfoProblem> {
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.init("not UTF-8")) }
        var groups: [String: [String: String]] = [:]
        var group: String?
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingSuffix("\r")
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { return .failure(.init("line \(number + 1): a bad group header")) }
                let name = String(line.dropFirst().dropLast())
                guard groups[name] == nil else { return .failure(.init("line \(number + 1): group [\(name)] twice")) }
                groups[name] = [:]
                group = name
                continue
            }
            guard let group, let equals = line.firstIndex(of: "=") else {
                return .failure(.init("line \(number + 1): neither a group nor key=value"))
            }
            let key = String(line[..<equals].trimmingSuffix(" "))
            let value = String(line[line.index(after: equals)...].drop { $0 == " " })
            groups[group]![key] = value
        }
        // The runtime's own name when the sandbox runs a runtime (as xdg-desktop-portal reads it).
        guard let name = groups["Runtime"]?["name"] ?? groups["Application"]?["name"] else {
            return .failure(.init("no [Application] name"))
        }
        guard isValidAppId(name) else { return .failure(.init("'\(name)' is not a valid application ID")) }
        guard let instance = groups["Instance"]?["instance-id"], !instance.isEmpty else {
            return .failure(.init("no [Instance] instance-id"))
        }
        var hostAccess: String?
        if list(groups["Context"]?["sockets"]).contains("session-bus") {
            hostAccess = "the host's session bus (--socket=session-bus)"
        } else if groups["Session Bus Policy"]?["org.freedesktop.Flatpak"] == "talk" {
            hostAccess = "access to org.freedesktop.Flatpak (flatpak-spawn --host)"
        }
        return .success(FlatpakInfo(appId: name, instanceId: instance, hostAccess: hostAccess))
    }

    private static func list(_ value: String?) -> [String] {
        value?.split(separator: ";").map(String.init) ?? []
    }

    /// Flatpak's rule (`flatpak_is_valid_name`): at most 255 bytes, at least three dot-separated elements of
    /// `[A-Za-z0-9_-]`, none empty, none starting with a digit (the last may contain `-`).
    static func isValidAppId(_ name: String) -> Bool {
        guard name.utf8.count <= 255 else { return false }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        for element in elements {
            guard let first = element.unicodeScalars.first, !(("0"..."9").contains(first)) else { return false }
            for scalar in element.unicodeScalars {
                let ok = ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                    || scalar == "_" || scalar == "-"
                guard ok else { return false }
            }
        }
        return true
    }
}

struct FlatpakInfoProblem: Error, Equatable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
