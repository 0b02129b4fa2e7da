import Foundation
import XCTest

/// Helpers for the tests of brokerd's connection and request limits.
enum LimitTestSupport {
    /// Raises this test process's soft descriptor limit to its hard one (a thousand sockets do not fit in 1024).
    static func raiseDescriptorLimit(atLeast needed: Int) throws {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0 else { throw missing("getrlimit failed: \(errno)") }
        if limit.rlim_cur < rlim_t(needed) {
            limit.rlim_cur = limit.rlim_max
            setrlimit(resource, &limit)
        }
        guard limit.rlim_cur >= rlim_t(needed) else {
            throw missing("the hard open file limit (\(limit.rlim_max)) is below the \(needed) this test needs")
        }
    }

    /// A resident set size in KiB, from /proc/<pid>/status.
    static func residentKiB(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else {
            throw RawClient.Failure.closed
        }
        return kib
    }

    static var python: String {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
    }

    /// A separate process (python3) connects once, asks `getStatus` and prints the answer line.
    static let probeScript = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(sys.argv[1])
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"getStatus"}\\n')
        data = b""
        while b"\\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        print(data.split(b"\\n")[0].decode())
        """

    /// Asks `getStatus` from another process; the decoded answer, or a failure message.
    static func probeFromAnotherProcess(_ socket: String) throws -> [String: Any] {
        let run = try runCommand("/usr/bin/env", [python, "-c", probeScript, socket])
        guard run.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any] else {
            return ["error": ["code": 0, "message": "probe failed (\(run.status)): \(run.stdout) \(run.stderr)"]]
        }
        return object
    }

    /// Whether the socket holds something not yet read (bytes, or the end of the stream), without waiting.
    static func hasUnreadInput(_ client: RawClient) -> Bool {
        var poller = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) == 1
    }

    /// The line the server has already sent on `client`, without waiting: nil when nothing is there.
    static func lineAlreadySent(on client: RawClient) -> String? {
        guard hasUnreadInput(client) else { return nil }
        return try? client.readLine()
    }

    static let halfALine = #"{"jsonrpc":"2.0","id":1,"method":"getSta"#
}
