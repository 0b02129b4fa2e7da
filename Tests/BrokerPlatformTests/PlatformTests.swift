import BrokerPlatform
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// BrokerPlatform's own logic: the lock, threads joined for a result, and the crash-safe file helpers every store
/// uses (written once, here).
final class PlatformTests: XCTestCase {
    /// A pinned process is alive while it runs, and not once it has exited: as a zombie not yet reaped, and reaped.
    func testAPinnedProcessIsAliveUntilItExits() throws {
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&child, "/bin/sleep", nil, nil, argv, environ), 0)
        guard case .success(let process) = ProcessProbe.pin(pid: child) else { return XCTFail("could not pin \(child)") }
        XCTAssertTrue(process.isAlive)
        XCTAssertEqual(kill(child, SIGKILL), 0)
        // Exited, not yet reaped: waitid with WNOWAIT waits for the exit and leaves the zombie.
        var info = siginfo_t()
        XCTAssertEqual(waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT), 0)
        XCTAssertFalse(process.isAlive, "a zombie is not a running process")
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertFalse(process.isAlive, "a reaped process is not alive")
    }

    func testLockedCountsEveryIncrementFromManyThreads() {
        let counter = Locked(0)
        let threads = (0..<8).compactMap { _ in
            JoinableThread.start { for _ in 0..<10_000 { counter.withLock { $0 += 1 } } }
        }
        XCTAssertEqual(threads.count, 8)
        for thread in threads { thread.join() }
        XCTAssertEqual(counter.withLock { $0 }, 80_000)
    }

    func testAJoinableThreadReturnsWhatItsBodyReturned() {
        let thread = JoinableThread.start { (1...100).reduce(0, +) }
        XCTAssertEqual(thread?.join(), 5050)
    }

    /// Eight jobs that each wait until all eight are running: on the cooperative pool (as many threads as cores)
    /// they could never all run at once; each on a thread of its own, they all get there.
    func testBlockingWorkRunsOnThreadsOfItsOwn() async {
        let arrived = Locked(0)
        let jobs = 8
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<jobs {
                group.addTask {
                    await PlatformThread.run { () -> Bool in
                        arrived.withLock { $0 += 1 }
                        for _ in 0..<10_000 {  // 10 s at most, then the job reports it never saw the others
                            if arrived.withLock({ $0 }) == jobs { return true }
                            usleep(1_000)
                        }
                        return false
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        XCTAssertEqual(results, Array(repeating: true, count: jobs))
    }

    /// Random bytes in one request: as many as asked, past the 256 bytes one getrandom call always fills, and never
    /// the same twice.
    func testSystemRandomGivesTheBytesAskedFor() {
        XCTAssertEqual(SystemRandom.bytes(0), [])
        let large = SystemRandom.bytes(3 << 20), other = SystemRandom.bytes(3 << 20)
        XCTAssertEqual(large.count, 3 << 20)
        XCTAssertNotEqual(large, other)
        // Every byte value turns up in 3 MiB of random bytes; a buffer left partly unfilled would not look so.
        XCTAssertEqual(Set(large.suffix(1 << 16)).count, 256)
        XCTAssertEqual(Set(large.prefix(1 << 16)).count, 256)
    }

    func testMoveAsideTakesTheCompanionsAlongAndNeverReplacesAFile() throws {
        let directory = try temporaryDirectory()
        let path = directory + "/cache.db"
        for (file, text) in [(path, "main"), (path + "-wal", "wal")] { try AtomicFile.replace(file, with: Array(text.utf8)) }
        // A name already taken, a dangling link included, is never overwritten.
        let now = time(nil)
        XCTAssertEqual(symlink("/nonexistent", "\(path).unreadable-\(now)"), 0)
        XCTAssertTrue(AtomicFile.exists("\(path).unreadable-\(now)"))
        let aside = try AtomicFile.moveAside(path, reason: "unreadable", companions: ["-wal", "-shm"])
        XCTAssertNotEqual(aside, "\(path).unreadable-\(now)")
        XCTAssertFalse(AtomicFile.exists(path))
        XCTAssertFalse(AtomicFile.exists(path + "-wal"))
        XCTAssertEqual(try AtomicFile.read(aside).map { String(decoding: $0, as: UTF8.self) }, "main")
        XCTAssertEqual(try AtomicFile.read(aside + "-wal").map { String(decoding: $0, as: UTF8.self) }, "wal")
        XCTAssertFalse(AtomicFile.exists(aside + "-shm"))
    }

    func testNamesListsADirectoryAndNothingForOneThatCannotBeRead() throws {
        let directory = try temporaryDirectory()
        for name in ["cache.db", "cache-20260101T000000Z.db", "cache.key.superseded-1"] { try AtomicFile.replace(directory + "/" + name, with: []) }
        XCTAssertEqual(AtomicFile.names(in: directory).sorted(), ["cache-20260101T000000Z.db", "cache.db", "cache.key.superseded-1"])
        XCTAssertEqual(AtomicFile.names(in: directory + "/missing"), [])
    }

    func testMovingAsideAMissingFileIsAnErrorNamingIt() throws {
        let path = try temporaryDirectory() + "/absent.db"
        XCTAssertThrowsError(try AtomicFile.moveAside(path, reason: "unreadable")) { error in
            XCTAssertEqual((error as? FileError)?.code, ENOENT)
            XCTAssertTrue("\(error)".contains(path))
        }
    }

    private func temporaryDirectory() throws -> String {
        var template = Array("/tmp/brokerd-platform-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FileError(operation: "mkdtemp", path: "/tmp", code: errno) }
        let path = String(cString: made)
        addTeardownBlock { _ = try? FileManagerFree.removeTree(path) }
        return path
    }
}

/// `rm -rf` without Foundation's FileManager (the module links no Foundation).
private enum FileManagerFree {
    static func removeTree(_ path: String) throws {
        guard let directory = opendir(path) else { unlink(path); return }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name != ".", name != ".." else { continue }
            var info = stat()
            let child = path + "/" + name
            if lstat(child, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { try removeTree(child) } else { unlink(child) }
        }
        closedir(directory)
        rmdir(path)
    }
}
