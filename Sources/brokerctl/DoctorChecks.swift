import BrokerClient
import BrokerConfig
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// One thing doctor looked at: what it found and, when something is to be done, what.
struct DoctorFinding: Encodable, Sendable {
    enum Status: String, Encodable, Sendable {
        case ok, warning, error
    }

    /// Stable, for scripts: `brokerd.reachable`, `socket.directory`, `network.unreachable` …
    var id: String
    var status: Status
    var message: String
    /// What to do about it, in plain words and commands; absent when nothing is to be done.
    var fix: String?
    /// What the finding is about when a check has several (a host, a discovery URL, an app).
    var subject: String?

    static func ok(_ id: String, _ message: String, subject: String? = nil) -> DoctorFinding {
        DoctorFinding(id: id, status: .ok, message: message, fix: nil, subject: subject)
    }

    static func warning(_ id: String, _ message: String, fix: String?, subject: String? = nil) -> DoctorFinding {
        DoctorFinding(id: id, status: .warning, message: message, fix: fix, subject: subject)
    }

    static func error(_ id: String, _ message: String, fix: String?, subject: String? = nil) -> DoctorFinding {
        DoctorFinding(id: id, status: .error, message: message, fix: fix, subject: subject)
    }
}

/// What every check may look at: where brokerd should be and, when it answered, its status.
struct DoctorContext: Sendable {
    var socketPath: String
    var status: StatusResult?
    /// Why brokerd did not answer.
    var failure: String?
    var now: Int64

    /// The systemd user units brokerd ships (systemd/ in the source tree).
    static let socketUnit = "brokerd.socket"
    static let serviceUnit = "brokerd.service"
    static let startHint = "'systemctl --user enable --now \(socketUnit)' (brokerd then starts on the first request), "
        + "or run 'brokerd' in a terminal to see why it stops"
}

/// The checks that need nothing but brokerd's answer and the file system.
enum DoctorChecks {
    static func reachability(_ context: DoctorContext) -> DoctorFinding {
        guard let status = context.status else {
            return .error("brokerd.reachable", "brokerd does not answer on \(context.socketPath): \(context.failure ?? "no answer")",
                          fix: "Start brokerd: \(DoctorContext.startHint). brokerctl looks for it at $BROKERD_SOCKET, else "
                            + "$XDG_RUNTIME_DIR/brokerd/brokerd.sock; pass --socket if it listens elsewhere.")
        }
        return .ok("brokerd.reachable", "brokerd \(status.version) (protocol \(status.protocolVersion)), pid \(status.pid), "
                   + "up \(Format.duration(status.uptimeSeconds)), answers on \(status.socket)"
                   + (status.socketActivated ? " (socket-activated)" : ""))
    }

    /// brokerctl and brokerd from different releases: usually a package upgrade with the old daemon still running.
    static func versionMatch(_ context: DoctorContext) -> DoctorFinding? {
        guard let status = context.status else { return nil }
        if status.protocolVersion.split(separator: ".").first != brokerProtocolVersion.split(separator: ".").first {
            return .error("brokerd.version", "brokerd speaks protocol \(status.protocolVersion); this brokerctl speaks "
                          + "\(brokerProtocolVersion): their major versions differ, so apps may fail to talk to it",
                          fix: "Restart brokerd so that the installed version runs: 'systemctl --user restart \(DoctorContext.serviceUnit)'.")
        }
        if status.version != brokerVersion {
            return .warning("brokerd.version", "brokerd \(status.version) runs, brokerctl is \(brokerVersion)",
                            fix: "After an upgrade, restart brokerd: 'systemctl --user restart \(DoctorContext.serviceUnit)'.")
        }
        return .ok("brokerd.version", "brokerd and brokerctl are both \(brokerVersion)")
    }

    /// What brokerd itself reports as wrong: failed cache writes, its problems, accounts that must sign in again.
    static func reportedProblems(_ context: DoctorContext) -> [DoctorFinding] {
        guard let status = context.status else { return [] }
        var findings: [DoctorFinding] = []
        if let writeError = status.lastWriteError {
            findings.append(.error("brokerd.cacheWrite", "brokerd cannot write its cache: \(writeError)",
                                   fix: "Check the state directory (space, permissions) and brokerd's log: "
                                    + "'journalctl --user -u \(DoctorContext.serviceUnit)'."))
        }
        for problem in status.problems {
            findings.append(.warning("brokerd.problem", problem, fix: "See brokerd's log: 'journalctl --user -u \(DoctorContext.serviceUnit)'."))
        }
        for account in status.signInRequired {
            findings.append(.warning("accounts.signInRequired", "\(account) must sign in again (its refresh token no longer works)",
                                     fix: "Sign in again from the app, or with 'brokerctl login PROFILE'.", subject: account))
        }
        return findings
    }

    /// The socket's directory must be the user's alone: whoever can write to it can put another socket in brokerd's place.
    static func socketDirectory(_ context: DoctorContext) -> DoctorFinding {
        let directory = DoctorSystem.parent(context.socketPath)
        let id = "socket.directory"
        guard let info = DoctorSystem.fileStatus(directory) else {
            let reason = DoctorSystem.errorText()
            if context.status == nil {
                return .ok(id, "the socket directory \(directory) does not exist yet (brokerd makes it, mode 0700, when it starts)")
            }
            return .error(id, "cannot examine the socket directory \(directory): \(reason)", fix: nil)
        }
        let mode = info.st_mode & 0o7777
        if (info.st_mode & S_IFMT) != S_IFDIR {
            return .error(id, "\(directory) is not a directory", fix: "Remove it; brokerd makes the directory when it starts.")
        }
        if info.st_uid != getuid() {
            return .error(id, "the socket directory \(directory) belongs to uid \(info.st_uid), not to you (uid \(getuid()))",
                          fix: "Stop brokerd, remove \(directory) and start brokerd again: it makes the directory, mode 0700.")
        }
        if mode & 0o022 != 0 {
            return .error(id, "the socket directory \(directory) is writable by \(writers(mode)) (mode \(octal(mode))): "
                          + "another user could put a socket of theirs in brokerd's place",
                          fix: "chmod 700 \(quoted(directory))")
        }
        if mode & 0o077 != 0 {
            return .warning(id, "the socket directory \(directory) is open to others (mode \(octal(mode)); brokerd makes it 0700)",
                            fix: "chmod 700 \(quoted(directory))")
        }
        return .ok(id, "the socket directory \(directory) is yours, mode \(octal(mode))")
    }

    static func socketFile(_ context: DoctorContext) -> DoctorFinding? {
        let id = "socket.file"
        // No socket at all needs no finding of its own: brokerd.reachable already says that nothing answers.
        guard let info = DoctorSystem.fileStatus(context.socketPath) else { return nil }
        let mode = info.st_mode & 0o7777
        if (info.st_mode & S_IFMT) != S_IFSOCK {
            return .error(id, "\(context.socketPath) is not a socket",
                          fix: "Stop brokerd, remove \(quoted(context.socketPath)) and start brokerd again.")
        }
        if info.st_uid != getuid() {
            return .error(id, "the socket \(context.socketPath) belongs to uid \(info.st_uid), not to you",
                          fix: "Stop whatever made it, remove it and start brokerd: \(DoctorContext.startHint).")
        }
        if mode & 0o022 != 0 {
            return .warning(id, "the socket \(context.socketPath) can be connected to by \(writers(mode)) (mode \(octal(mode))); "
                            + "brokerd still refuses other users, but the socket should be 0600",
                            fix: "chmod 600 \(quoted(context.socketPath))")
        }
        if context.status == nil {
            return .error(id, "the socket \(context.socketPath) exists but nobody answers on it (a stale socket of a brokerd that stopped)",
                          fix: "Remove it and start brokerd: rm \(quoted(context.socketPath)); then \(DoctorContext.startHint).")
        }
        return .ok(id, "the socket \(context.socketPath) is yours, mode \(octal(mode))")
    }

    /// Free space where the cache lives: a full disk stops every cache write (new sign-ins are then lost on restart).
    static func diskSpace(_ context: DoctorContext) -> DoctorFinding {
        let directory = context.status?.cachePath.map(DoctorSystem.parent) ?? BrokerConfiguration.defaultStateDirectory()
        let existing = DoctorSystem.existingAncestor(directory)
        var info = statvfs()
        guard statvfs(existing, &info) == 0 else {
            return .warning("disk.space", "cannot measure free space at \(existing): \(DoctorSystem.errorText())", fix: nil)
        }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        let where_ = existing == directory ? directory : "\(directory) (not made yet; measured at \(existing))"
        let mib = free >> 20
        if info.f_favail == 0 || free < 16 << 20 {
            return .error("disk.space", "only \(mib) MiB\(info.f_favail == 0 ? " and no inodes" : "") free for the state directory \(where_): "
                          + "brokerd cannot save its cache", fix: "Free space on that file system.")
        }
        if free < 256 << 20 {
            return .warning("disk.space", "\(mib) MiB free for the state directory \(where_)", fix: "Free space on that file system.")
        }
        if access(existing, W_OK) != 0 {
            return .error("disk.space", "the state directory \(existing) is not writable: \(DoctorSystem.errorText())",
                          fix: "Make it yours and writable: chmod u+rwx \(quoted(existing)).")
        }
        return .ok("disk.space", "\(mib >= 10240 ? "\(mib >> 10) GiB" : "\(mib) MiB") free for the state directory \(where_)")
    }

    /// Sign-ins and consents wait for the user, not for brokerd: each says what to do.
    static func waitingForUser(_ context: DoctorContext) -> [DoctorFinding] {
        guard let status = context.status else { return [] }
        var findings: [DoctorFinding] = []
        for signIn in status.pendingSignIns ?? [] {
            let left = signIn.expiresOn - context.now
            findings.append(.warning("signIn.pending", "app \(signIn.clientId) waits for a sign-in"
                                     + (signIn.loginHint.map { " as \($0)" } ?? "")
                                     + (left > 0 ? " (it gives up \(Format.relative(left)))" : " (expired)"),
                                     fix: "Open \(signIn.verificationUri) on any device and enter the code \(signIn.userCode).",
                                     subject: signIn.requestId))
        }
        for consent in status.pendingConsents ?? [] {
            findings.append(.warning("consent.pending", "\(consent.app) asks to use client ID \(consent.clientId) "
                                     + "(\(consent.waiting) request\(consent.waiting == 1 ? "" : "s") waiting)",
                                     fix: "Answer it: 'brokerctl apps allow \(consent.app) --client-id \(consent.clientId)' "
                                        + "(or 'brokerctl apps deny …').", subject: consent.consentId))
        }
        if findings.isEmpty { findings.append(.ok("signIn.pending", "no sign-in or consent waits for you")) }
        return findings
    }

    static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    static func writers(_ mode: mode_t) -> String {
        switch (mode & 0o020 != 0, mode & 0o002 != 0) {
        case (true, true): return "your group and everyone"
        case (true, false): return "your group"
        default: return "everyone"
        }
    }

    /// A path as a shell word.
    static func quoted(_ path: String) -> String {
        path.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@".contains($0) } ? path
            : "'" + path.replacingAll("'", with: "'\\''") + "'"
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
