import CSystemd
import BrokerPlatform
import Logging

/// A waiting device-code sign-in shown on the desktop through `org.freedesktop.Notifications`, for D-Bus callers,
/// which have no channel to show it themselves (and, once per start, caches waiting for their keys). Only when a notification server already owns that name: brokerd asks
/// the bus (NameHasOwner) and never starts one by activation. Failing to notify is logged, never fatal.
///
/// Each notification has a session-bus connection of its own, kept until the notification is closed: the front end's
/// connection belongs to its thread, and some servers drop a notification whose sender left the bus. The calls block
/// (5 s at most), so each runs on a thread of its own (PlatformThread.run) rather than on the threads of Swift's tasks.
public struct DesktopNotifications: Sendable {
    static let serverName = "org.freedesktop.Notifications"
    static let callTimeoutMicroseconds: UInt64 = 5_000_000

    /// A notification on screen and the connection that showed it.
    public final class Shown: @unchecked Sendable {
        fileprivate let bus: OpaquePointer
        let id: UInt32
        fileprivate init(bus: OpaquePointer, id: UInt32) {
            self.bus = bus
            self.id = id
        }
    }

    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// Shows a notification when a notification server is on the session bus; nil when there is none or it failed.
    @discardableResult
    public func show(summary: String, body: String) async -> Shown? {
        let logger = self.logger
        return await PlatformThread.run { Self.post(summary: summary, body: body, logger: logger) }
    }

    /// Closes the notification (the sign-in it showed is over) and its connection.
    func close(_ shown: Shown) async {
        let logger = self.logger
        await PlatformThread.run {
            var error = [CChar](repeating: 0, count: 512)
            let r = brokerd_close_notification(shown.bus, shown.id, &error, error.count)
            if r < 0 {
                logger.notice("desktop notification not closed", metadata: [
                    "notification_id": "\(shown.id)", "error": "\(Self.text(error))",
                ])
            }
            sd_bus_flush_close_unref(shown.bus)
        }
    }

    private static func post(summary: String, body: String, logger: Logger) -> Shown? {
        var opened: OpaquePointer?
        let r = sd_bus_open_user(&opened)
        guard r >= 0, let bus = opened else {
            logger.notice("no desktop notification: no session bus", metadata: ["error": "\(DBusFrontEnd.errorText(r))"])
            return nil
        }
        _ = sd_bus_set_method_call_timeout(bus, callTimeoutMicroseconds)
        let owned = brokerd_bus_name_has_owner(bus, serverName)
        guard owned > 0 else {
            if owned == 0 {
                logger.info("no desktop notification: no notification server on the session bus (\(serverName))")
            } else {
                logger.notice("no desktop notification: NameHasOwner failed", metadata: ["error": "\(DBusFrontEnd.errorText(owned))"])
            }
            sd_bus_flush_close_unref(bus)
            return nil
        }
        var id: UInt32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard brokerd_notify(bus, summary, body, &id, &error, error.count) >= 0 else {
            logger.warning("desktop notification failed", metadata: ["error": "\(Self.text(error))"])
            sd_bus_flush_close_unref(bus)
            return nil
        }
        logger.info("desktop notification shown", metadata: ["notification_id": "\(id)"])
        return Shown(bus: bus, id: id)
    }

    /// The NUL-terminated text a C helper wrote into `buffer`.
    static func text(_ buffer: [CChar]) -> String {
        buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
