/// An app as brokerd names it, in the printable form the configuration and `brokerctl apps` take:
/// `flatpak:ID`, `snap:NAME` or `exe:PATH`. `unknown:` marks a caller brokerd could not identify (never granted).
public struct AppID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case flatpak, snap, exe, unknown
    }

    public var kind: Kind
    public var name: String

    public init(kind: Kind, name: String) {
        self.kind = kind
        self.name = name
    }

    /// `flatpak:org.example.App`, `snap:firefox`, `exe:/usr/bin/az`; nil for anything else.
    public init?(parsing text: String) {
        guard let colon = text.firstIndex(of: ":"), let kind = Kind(rawValue: String(text[..<colon])), kind != .unknown else {
            return nil
        }
        let name = String(text[text.index(after: colon)...])
        guard !name.isEmpty, kind != .exe || name.hasPrefix("/") else { return nil }
        self.init(kind: kind, name: name)
    }

    public var description: String { "\(kind.rawValue):\(name)" }

    /// Flatpak apps and confined snaps: they cannot read other apps' files, so the broker is their only way to tokens.
    public var isSandboxed: Bool { kind == .flatpak || kind == .snap }

    public static func < (a: AppID, b: AppID) -> Bool { a.description < b.description }
}

/// Who is asking, worked out once per socket connection or D-Bus unique name (never per request, never again from the
/// pid): the uid, the pinned pid, the executable, the systemd unit and the sandbox. The rules that turn what `/proc`
/// says into an identity live here (`classify`); the front ends only gather the evidence.
public struct CallerIdentity: Sendable, Equatable, CustomStringConvertible {
    public enum Sandbox: Sendable, Equatable {
        case none
        case flatpak(appId: String, instanceId: String)
        case snap(name: String, app: String)
    }

    public var uid: UInt32
    public var pid: Int32
    /// How the pid was pinned (`SO_PEERPIDFD`, `pidfd_open`), for the record.
    public var pinnedBy: String?
    public var executable: String?
    /// The systemd unit from the cgroup (`app-flatpak-….scope`, `snap.….scope`, `app-gnome-….scope`): a hint, never proof.
    public var unit: String?
    public var sandbox: Sandbox
    /// Why the caller could not be identified; such a caller gets no token (never taken for a host process).
    public var failure: String?
    /// What weakened the identity (a Flatpak with session-bus access, a snap in complain mode): shown, not secret.
    public var notes: [String] = []

    public init(uid: UInt32, pid: Int32, pinnedBy: String? = nil, executable: String?, unit: String? = nil,
                sandbox: Sandbox = .none, failure: String? = nil, notes: [String] = []) {
        self.uid = uid
        self.pid = pid
        self.pinnedBy = pinnedBy
        self.executable = executable
        self.unit = unit
        self.sandbox = sandbox
        self.failure = failure
        self.notes = notes
    }

    /// A caller that could not be identified.
    public static func unidentified(uid: UInt32, pid: Int32, executable: String?, reason: String) -> CallerIdentity {
        CallerIdentity(uid: uid, pid: pid, executable: executable, failure: reason)
    }

    public var app: AppID {
        if failure != nil { return AppID(kind: .unknown, name: "pid \(pid)") }
        switch sandbox {
        case .flatpak(let id, _): return AppID(kind: .flatpak, name: id)
        case .snap(let name, _): return AppID(kind: .snap, name: name)
        case .none: return AppID(kind: .exe, name: executable ?? "(unknown executable)")
        }
    }

    public var description: String {
        var text = "\(app) pid \(pid)"
        if let failure { text += " (unidentified: \(failure))" }
        return text
    }

    /// What the process showed, as the platform layer read it through its pinned `/proc` directory.
    public enum Root: Sendable, Equatable {
        case brokersOwn
        case noFlatpakInfo
        case flatpakInfo([UInt8])
    }

    /// The identity of a process from its evidence, in xdg-desktop-portal's order: Flatpak, then snap, then host.
    /// - Flatpak: `/.flatpak-info` read through the caller's own root, only when that root is not brokerd's (a host
    ///   process cannot make itself an app by writing a file). A Flatpak that can reach the host's session bus or
    ///   `org.freedesktop.Flatpak` can run anything on the host: it counts as a host process.
    /// - snap: an AppArmor label `snap.NAME.APP` in enforce mode; complain mode is no confinement. The cgroup is a
    ///   hint only.
    public static func classify(uid: UInt32, pid: Int32, pinnedBy: String?, executable: String?, cgroup: String?,
                                securityLabel: String?, root: Root) -> CallerIdentity {
        var identity = CallerIdentity(uid: uid, pid: pid, pinnedBy: pinnedBy, executable: executable,
                                      unit: cgroup.flatMap(unit(fromCgroup:)))
        let snap = securityLabel.flatMap(SnapLabel.init)
        if case .flatpakInfo(let bytes) = root {
            // A confined snap that shows a /.flatpak-info (a layout can put files in its root) is neither: refused.
            if let snap, snap.enforced {
                identity.failure = "snap \(snap.name) shows a /.flatpak-info: it is taken for neither"
                return identity
            }
            switch FlatpakInfo.parse(bytes) {
            case .failure(let problem):
                identity.failure = "its /.flatpak-info cannot be used: \(problem)"
            case .success(let info):
                if let escape = info.hostAccess {
                    identity.notes.append("Flatpak app \(info.appId) has \(escape): counted as a host process")
                } else {
                    identity.sandbox = .flatpak(appId: info.appId, instanceId: info.instanceId)
                }
            }
            return identity
        }
        if let snap {
            if snap.enforced {
                identity.sandbox = .snap(name: snap.name, app: snap.app)
            } else {
                identity.notes.append("snap \(snap.name) runs in \(snap.mode) mode: counted as a host process")
            }
        }
        return identity
    }

    /// The leaf of a cgroup v2 path when it is a unit (`….scope`, `….service`).
    static func unit(fromCgroup text: String) -> String? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::") }),
              let leaf = line.split(separator: "/").last else { return nil }
        return leaf.hasSuffix(".scope") || leaf.hasSuffix(".service") ? String(leaf) : nil
    }
}

/// An AppArmor label of a snap: `snap.NAME.APP (MODE)` or `snap.NAME.hook.HOOK (MODE)` (snapd's security tags).
struct SnapLabel: Equatable {
    var name: String
    var app: String
    var mode: String

    var enforced: Bool { mode == "enforce" }

    init?(_ label: String) {
        var text = Substring(label)
        var mode = "enforce"  // a label without a mode is the enforced profile's
        if let open = text.lastIndex(of: "("), text.hasSuffix(")") {
            mode = String(text[text.index(after: open)..<text.index(before: text.endIndex)])
            text = text[..<open]
        }
        let parts = text.trimmingSuffix(" ").split(separator: ".", omittingEmptySubsequences: false)
        guard parts.first == "snap", parts.count == 3 || (parts.count == 4 && parts[2] == "hook"),
              parts.dropFirst().allSatisfy({ !$0.isEmpty }) else { return nil }
        name = String(parts[1])
        app = parts.count == 4 ? "hook.\(parts[3])" : String(parts[2])
        self.mode = mode
    }
}

extension Substring {
    func trimmingSuffix(_ character: Character) -> Substring {
        var text = self
        while text.last == character { text = text.dropLast() }
        return text
    }
}
