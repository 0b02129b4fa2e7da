import BrokerCore
import BrokerPlatform
import CSystemd
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// brokerd on the D-Bus session bus as `com.microsoft.identity.broker1` (object `/com/microsoft/identity/broker1`,
/// interface `com.microsoft.identity.Broker1`), for the apps that reach a broker that way (msal-python with
/// `enable_broker_on_linux`, MSAL.NET, Edge…). sd-bus answers `org.freedesktop.DBus.Peer.Ping` itself.
///
/// Threading: sd-bus objects are not thread-safe, so one thread of its own owns the connection. It dispatches each
/// call to a task (`Broker1Methods`), and the answers come back through a queue and an eventfd that wakes the thread,
/// which sends them. A call never blocks the bus: many can run at once.
public final class DBusFrontEnd: @unchecked Sendable {
    public static let busName = "com.microsoft.identity.broker1"
    static let objectPath = "/com/microsoft/identity/broker1"

    public enum Outcome: Sendable, Equatable {
        case serving
        /// Another process owns the name; brokerd never takes it away.
        case nameOwnedByAnother
        case noSessionBus(String)
        case failed(String)
    }

    private enum Reply {
        case json(String)
        case error(name: String, text: String)
    }

    private let bus: OpaquePointer
    private let wake: Int32
    private let methods: Broker1Methods
    private let logger: Logger
    private let target: UnsafeMutablePointer<brokerd_bus_target>
    private let leaving: UnsafeMutablePointer<brokerd_name_left_target>
    private let replies = Locked<[(message: OpaquePointer, reply: Reply)]>([])
    private let stopping = Atomic<Bool>(false)
    private var thread: JoinableThread<Void>?
    private let ownUID = geteuid()
    /// Who each unique name is, worked out at its first call (CallerIdentity), and the cache hit it was answered last
    /// (`Broker1Methods.answerAgain`). Unique names are never reused on a bus, so an entry never describes another
    /// caller; only the bus thread touches this.
    private var callers: [String: KnownSender] = [:]

    /// A reference: a call looks its sender up once and works on what it found, where a value was copied out (its
    /// identity's strings retained) and written back at each of the four reads and writes of a cache hit.
    private final class KnownSender {
        let identity: CallerIdentity
        var remembered: RememberedBusAnswer?
        /// Its cache hits, counted for the audit until their window ends, it leaves the bus or the audit is read.
        var audit = HitAudit()
        /// The client IDs the app policy lets it use without asking, while the policy stands.
        var access = AccessMemo()
        init(identity: CallerIdentity) { self.identity = identity }
    }
    /// When the first of the senders' audit windows ends (Unix seconds, the broker's clock); nil: no hit is counted.
    private var auditDue: Int64?
    /// Numbers the remembered answers' counts (`HitAudit.countRepeat`).
    private var nextAnswerNumber = 1
    /// Readers of the audit waiting for the counts held here; closed once the bus thread has ended.
    private let countsWanted = Locked<(closed: Bool, readers: [CheckedContinuation<Void, Never>])>((false, []))
    static let rememberedCallers = 4_096

    private init(bus: OpaquePointer, wake: Int32, methods: Broker1Methods, logger: Logger) {
        self.bus = bus
        self.wake = wake
        self.methods = methods
        self.logger = logger
        target = .allocate(capacity: 1)
        leaving = .allocate(capacity: 1)
    }

    /// Connects to the session bus (`DBUS_SESSION_BUS_ADDRESS`, else the user bus in `$XDG_RUNTIME_DIR/bus`), serves
    /// the object and asks for the name without taking it from anyone. nil with the reason when not serving.
    public static func start(methods: Broker1Methods, logger: Logger) -> (DBusFrontEnd?, Outcome) {
        var bus: OpaquePointer?
        var r = sd_bus_open_user(&bus)
        guard r >= 0, let bus else { return (nil, .noSessionBus(errorText(r))) }
        let wake = brokerd_wake_fd()
        guard wake >= 0 else {
            sd_bus_flush_close_unref(bus)
            return (nil, .failed("eventfd: \(errorText(-errno))"))
        }
        let service = DBusFrontEnd(bus: bus, wake: wake, methods: methods, logger: logger)
        service.target.initialize(to: brokerd_bus_target(handler: { message, context in
            guard let message, let context else { return -EINVAL }
            return Unmanaged<DBusFrontEnd>.fromOpaque(context).takeUnretainedValue().handle(message)
        }, context: Unmanaged.passUnretained(service).toOpaque()))
        service.leaving.initialize(to: brokerd_name_left_target(handler: { name, context in
            guard let name, let context else { return }
            Unmanaged<DBusFrontEnd>.fromOpaque(context).takeUnretainedValue().callerLeft(String(cString: name))
        }, context: Unmanaged.passUnretained(service).toOpaque()))
        methods.apps.handsOverCountsBeforeReads { [weak service] in await service?.handOverCountsForReader() }
        r = brokerd_bus_add_broker1(bus, nil, objectPath, service.target)
        if r >= 0 { r = brokerd_watch_names_leaving(bus, service.leaving) }
        if r >= 0 { r = sd_bus_request_name(bus, busName, 0) }
        guard r >= 0 else {
            service.close()
            return (nil, r == -EEXIST ? .nameOwnedByAnother : .failed("\(busName): \(errorText(r))"))
        }
        service.startThread()
        return (service, .serving)
    }

    /// Releases the name and closes the connection; calls still running get no answer (the bus tells their callers).
    public func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        signalWake()
        thread?.join()
        close()
    }

    private func close() {
        sd_bus_flush_close_unref(bus)
        _ = Glibc.close(wake)
        let left: [OpaquePointer] = replies.withLock { pending in
            defer { pending = [] }
            return pending.map(\.message)
        }
        for message in left { sd_bus_message_unref(message) }
    }

    // MARK: The bus thread

    private func startThread() {
        // The thread holds the front end until its loop ends.
        thread = JoinableThread.start { [self] in run() }
    }

    private func run() {
        let failure = BusLoop.run(bus, wake: wake, stopping: { stopping.load(ordering: .sequentiallyConsistent) },
                                  timeout: { auditTimeout }, work: {
                                      sendReplies()
                                      handOverCounts()
                                  })
        for known in callers.values { handOver(known) }
        for reader in countsWanted.withLock({ wanted in
            wanted.closed = true
            defer { wanted.readers = [] }
            return wanted.readers
        }) { reader.resume() }
        if let failure {
            logger.error("D-Bus connection failed; the D-Bus front end stops", metadata: ["error": "\(Self.errorText(failure))"])
        }
    }

    private func signalWake() { BusLoop.signal(wake) }

    private func sendReplies() {
        let ready: [(message: OpaquePointer, reply: Reply)] = replies.withLock { pending in
            defer { pending = [] }
            return pending
        }
        for (message, reply) in ready {
            let r: Int32
            switch reply {
            case .json(let text): r = Self.reply(message, text)
            case .error(let name, let text): r = brokerd_bus_reply_error(message, name, text)
            }
            if r < 0 { logger.notice("D-Bus answer not sent", metadata: ["error": "\(Self.errorText(r))"]) }
            sd_bus_message_unref(message)
        }
    }

    // MARK: Calls

    /// On the bus thread: checks the caller, answers a cache hit at once, anything else from a task (the reply is sent
    /// by the bus thread).
    private func handle(_ message: OpaquePointer) -> Int32 {
        let method = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
        var version: UnsafePointer<CChar>?, correlation: UnsafePointer<CChar>?, request: UnsafePointer<CChar>?
        let r = brokerd_bus_read_sss(message, &version, &correlation, &request)
        guard r >= 0 else { return r }  // sd-bus answers the caller with the error
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) }
        let known = sender.flatMap { callers[$0] }
        guard let caller = known?.identity ?? newCaller(of: message, method: method) else {
            return brokerd_bus_reply_error(message, "org.freedesktop.DBus.Error.AccessDenied",
                                           "brokerd serves uid \(ownUID) only")
        }
        let correlationId = correlation.map { String(cString: $0) } ?? ""
        // The request's bytes, which sd-bus has checked are UTF-8: a cache hit reads them as they are.
        let requestBytes = request.map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? []
        // A cache hit is answered here: a task and the hop back to this thread cost more than the hit itself. The
        // same request again is answered from what this caller was given last, while that holds.
        if let answer = answerFromCache(known ?? sender.flatMap { callers[$0] }, method: method, correlationId: correlationId,
                                        request: requestBytes, caller: caller) {
            let sent = Self.reply(message, answer)
            if sent < 0 { logger.notice("D-Bus answer not sent", metadata: ["error": "\(Self.errorText(sent))"]) }
            return 1
        }
        sd_bus_message_ref(message)
        let pending = PendingCall(message)
        let requestJSON = String(decoding: requestBytes, as: UTF8.self)
        Task {
            let answer = await self.methods.answer(method: method, correlationId: correlationId, request: requestJSON,
                                                   caller: caller, sender: sender)
            // After stop() the connection and the eventfd are gone; the caller learns from the bus that we left.
            guard !self.stopping.load(ordering: .sequentiallyConsistent) else { return }
            self.replies.withLock { $0.append((pending.message, .json(answer))) }
            self.signalWake()
        }
        return 1
    }

    /// On the bus thread: a unique name left the bus. What was kept about it goes (its identity, its last answer,
    /// which holds a token), and its sign-ins end.
    private func callerLeft(_ name: String) {
        if let known = callers.removeValue(forKey: name) { handOver(known) }
        guard !methods.flows.started(by: name).isEmpty else { return }
        let methods = self.methods
        Task { await methods.callerLeft(name) }
    }

    /// A cache hit's answer, given again when the sender asks what it asked last, or made now (and kept for its next
    /// call); nil when the request takes a task. A sender's identity is kept from its first call: the bus sets the
    /// sender of every message and never gives a unique name twice, so its credentials are not asked again
    /// (GetConnectionCredentials was a bus round trip on every call, half a cache hit's time).
    private func answerFromCache(_ known: KnownSender?, method: String, correlationId: String, request: [UInt8],
                                 caller: CallerIdentity) -> [UInt8]? {
        if let known, var remembered = known.remembered.take() {  // kept again only if it still holds
            if let answer = methods.answerAgain(&remembered, method: method, correlationId: correlationId, request: request) {
                count(remembered.subject, number: remembered.number, repeating: true, of: known)
                known.remembered = remembered
                return answer
            }
        }
        var access = known?.access ?? AccessMemo()
        defer { known?.access = access }  // what it learned serves the caller's next calls
        guard let (answer, remembered, subject) = methods.cachedAnswer(method: method, correlationId: correlationId,
                                                                       request: request, caller: caller, access: &access)
        else { return nil }
        guard let known else {  // no unique name (a direct connection): on the record at once
            methods.apps.record(caller, frontEnd: "dbus", clientId: subject.clientId, scopes: subject.scopes,
                                homeAccountId: subject.homeAccountId, username: subject.username, outcome: "cache")
            return answer
        }
        known.remembered = remembered.map { remembered in
            var numbered = remembered
            numbered.number = nextAnswerNumber
            nextAnswerNumber += 1
            return numbered
        }
        count(subject, number: known.remembered?.number ?? 0, repeating: false, of: known)
        return answer
    }

    // MARK: The audit's counts

    /// Counts a cache hit of `known` (`HitAudit`: a repeat of its remembered answer is an increment), handing over
    /// the window it closed, if any.
    private func count(_ subject: HitAudit.Subject, number: Int, repeating: Bool, of known: KnownSender) {
        let now = methods.broker.now()
        if repeating, known.audit.countRepeat(number: number, at: now) { return }
        let finished = known.audit.add(subject, number: number, at: now)
        if !finished.isEmpty { methods.apps.record(finished, caller: known.identity, frontEnd: "dbus") }
        if let due = known.audit.due, auditDue.map({ due < $0 }) ?? true { auditDue = due }
    }

    private func handOver(_ known: KnownSender) {
        let tallies = known.audit.take()
        if !tallies.isEmpty { methods.apps.record(tallies, caller: known.identity, frontEnd: "dbus") }
    }

    /// On the bus thread after each round: the counts whose window ended, or all of them when a reader of the audit
    /// waits for them.
    private func handOverCounts() {
        let readers = countsWanted.withLock { wanted in
            defer { wanted.readers = [] }
            return wanted.readers
        }
        let now = methods.broker.now()
        guard !readers.isEmpty || auditDue.map({ $0 <= now }) ?? false else { return }
        auditDue = nil
        for known in callers.values {
            if !readers.isEmpty || known.audit.due.map({ $0 <= now }) ?? false { handOver(known) }
            if let due = known.audit.due, auditDue.map({ due < $0 }) ?? true { auditDue = due }
        }
        for reader in readers { reader.resume() }
    }

    /// How long the bus thread may wait before a window's counts are due (milliseconds); nil: no count is held.
    private var auditTimeout: Int32? {
        auditDue.map { Int32(clamping: max(0, ($0 - methods.broker.now()) * 1_000)) }
    }

    /// For a reader of the audit (`AppAccess.handsOverCountsBeforeReads`): returns once the counts held when it asked
    /// are queued for the audit.
    private func handOverCountsForReader() async {
        await withCheckedContinuation { (reader: CheckedContinuation<Void, Never>) in
            let closed = countsWanted.withLock { wanted in
                if !wanted.closed { wanted.readers.append(reader) }
                return wanted.closed
            }
            if closed { reader.resume() } else { signalWake() }
        }
    }

    /// A sender's first call: its credentials from the bus, then its identity (`identity(of:)`). nil when it runs as
    /// another user (refused).
    private func newCaller(of message: OpaquePointer, method: String) -> CallerIdentity? {
        var uid: uid_t = 0, pid: pid_t = 0
        var unique = [CChar](repeating: 0, count: 256), label = [CChar](repeating: 0, count: 512)
        guard brokerd_bus_sender_identity(message, &uid, &pid, &unique, unique.count, &label, label.count) >= 0, uid == ownUID else {
            logger.warning("D-Bus call refused: the caller runs as another user", metadata: [
                "method": "\(method)", "client_pid": "\(pid)", "client_uid": "\(uid)",
            ])
            return nil
        }
        return identity(of: Self.text(unique), uid: uid, pid: pid, label: Self.text(label))
    }

    /// An answer as the call's reply. A String's bytes are valid UTF-8, so sd-bus is not asked to check them again
    /// (`brokerd_bus_reply_utf8`): that check, over the two kilobytes of a token answer, was a tenth of brokerd's time
    /// in a repeated D-Bus hit.
    /// JSON text holds no NUL (the writer escapes it); were one there, the caller gets an error, not a wait for ever.
    static func reply(_ message: OpaquePointer, _ text: String) -> Int32 {
        var text = text
        return text.withUTF8 { reply(message, utf8: $0) }
    }

    /// `reply` of a cache hit's answer, written as bytes from Strings (`Broker1Methods.cachedAnswer`): valid UTF-8 too.
    static func reply(_ message: OpaquePointer, _ answer: [UInt8]) -> Int32 {
        answer.withUnsafeBufferPointer { reply(message, utf8: $0) }
    }

    private static func reply(_ message: OpaquePointer, utf8: UnsafeBufferPointer<UInt8>) -> Int32 {
        let r = utf8.withMemoryRebound(to: CChar.self) { brokerd_bus_reply_utf8(message, $0.baseAddress, $0.count) }
        guard r == -EBADMSG else { return r }
        return brokerd_bus_reply_error(message, "org.freedesktop.DBus.Error.Failed", "brokerd's answer held a NUL byte")
    }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(-code)) }

    static func text(_ buffer: [CChar]) -> String { buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }

    /// The identity of a unique name, worked out at its first call: the process pinned by the bus's `ProcessFD` where
    /// it hands one out, else the pid it reported pinned with `pidfd_open` (Debian 12's buses have no ProcessFD);
    /// `/proc` read through it, then checked: the pidfd still names the pid and the name is still on the bus. A caller
    /// that left meanwhile (its pid free for reuse) is unidentified, never taken for whoever has the pid now.
    private func identity(of name: String, uid: uid_t, pid: pid_t, label: String) -> CallerIdentity {
        if let known = callers[name] { return known.identity }
        var identity: CallerIdentity
        let busPidfd = brokerd_bus_sender_pidfd(bus, name)
        let pinned = busPidfd >= 0 ? ProcessProbe.adopt(pidfd: busPidfd, source: .busProcessFD) : ProcessProbe.pin(pid: pid)
        switch pinned {
        case .failure(let failure):
            identity = .unidentified(uid: uid, pid: pid, executable: nil, reason: failure.description)
        case .success(let pinned):
            do {
                let facts = try ProcessProbe.facts(of: pinned, label: label.isEmpty ? nil : label)
                identity = CallerIdentity.classify(uid: uid, pid: facts.pid, pinnedBy: pinned.source.rawValue,
                                                   executable: facts.executable, cgroup: facts.cgroup,
                                                   securityLabel: facts.securityLabel, root: .init(facts.root))
                if brokerd_bus_name_has_owner(bus, name) != 1 {
                    identity = .unidentified(uid: uid, pid: pid, executable: facts.executable,
                                             reason: "\(name) left the bus while it was identified")
                }
            } catch {
                identity = .unidentified(uid: uid, pid: pid, executable: nil, reason: error.description)
            }
        }
        if callers.count >= Self.rememberedCallers {
            for known in callers.values { handOver(known) }
            callers.removeAll()
        }
        callers[name] = KnownSender(identity: identity)
        logger.debug("D-Bus caller identified", metadata: [
            "sender": "\(name)", "client_pid": "\(pid)", "app": "\(identity.app)", "notes": "\(identity.notes.joined(separator: "; "))",
        ])
        return identity
    }
}

/// A referenced sd-bus message on its way to a task and back: only the bus thread touches it.
private struct PendingCall: @unchecked Sendable {
    let message: OpaquePointer
    init(_ message: OpaquePointer) { self.message = message }
}

extension CallerIdentity.Root {
    fileprivate init(_ root: ProcessFacts.Root) {
        switch root {
        case .brokersOwn: self = .brokersOwn
        case .noFlatpakInfo: self = .noFlatpakInfo
        case .flatpakInfo(let bytes): self = .flatpakInfo(bytes)
        }
    }
}
