import BrokerProtocol
import Foundation
import XCTest

/// The .deb and .rpm that scripts/package.sh built (issue #6), checked as a user's machine would see them: the .deb
/// is installed for real with dpkg, its brokerd is socket-activated with the installed unit's socket path and
/// answers the installed brokerctl with /opt/swift hidden, and dpkg -r / dpkg -P remove what it installed and
/// nothing of the user's state.
///
/// scripts/test.sh builds the packages first and exports `BROKERD_PACKAGES_DIR`; without it (a plain `swift test`)
/// these tests skip. They install and remove the package, so they need root, and they refuse to run where a
/// brokerd is already installed (that would be someone's installation).
final class PackagingTests: XCTestCase {
    /// Libraries the release binaries may link dynamically (all from libc6, libstdc++6, libgcc-s1, libsystemd0,
    /// libsqlite3-0: brokerd's cache database, libqrencode4: brokerctl's QR codes),
    /// plus zlib: swift-nio-extras (via async-http-client) declares `-lz` although it compiles its own renamed
    /// copy, so brokerd records libz.so.1 without using a symbol of it (zlib1g is Priority: required).
    static let allowedLibraries: Set<String> = [
        "libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1", "libsystemd.so.0",
        "libsqlite3.so.0", "libz.so.1", "libqrencode.so.4",
    ]
    /// Packages the .deb may depend on: those libraries' packages, init-system-helpers for the maintainer
    /// scripts that enable the user socket (deb-systemd-helper --user), and dbus-user-session for the user
    /// manager's dbus.socket that brokerd.service's BusName= requires.
    static let allowedDependencies: Set<String> = [
        "libc6", "libstdc++6", "libgcc-s1", "libsystemd0", "libsqlite3-0", "zlib1g", "init-system-helpers",
        "dbus-user-session", "libqrencode4",
    ]
    /// Lintian warnings that are kept on purpose; each is explained in docs/admin.md ("Installing from packages").
    static let acceptedLintianWarnings: Set<String> = ["initial-upload-closes-no-bugs"]

    /// The unpacked .deb is shared by the tests of this class; a static is never deinitialized, so drop it here.
    override class func tearDown() {
        Packages.removeExtractedDeb()
        super.tearDown()
    }

    // MARK: - The .deb installed, used and removed

    func testDebInstallsServesWithoutSwiftAndRemovesCleanly() throws {
        let deb = try Packages.file(suffix: ".deb")
        try requireRootWithoutInstalledBrokerd()
        defer { _ = try? runCommand("/usr/bin/dpkg", ["--purge", "brokerd"]) }

        let install = try runCommand("/usr/bin/dpkg", ["-i", deb])
        XCTAssertEqual(install.status, 0, install.stdout + install.stderr)
        let installed = try installedFiles()
        for path in Packages.expectedDebFiles {
            XCTAssertTrue(installed.contains(path), "the .deb does not install \(path): \(installed.sorted())")
        }
        for path in installed {
            XCTAssertTrue(FileManager.default.fileExists(atPath: path), "dpkg -L lists \(path), which is missing")
        }
        // dh_installsystemduser enabled the socket for every user; the service has no [Install]: started on demand.
        let wants = "/etc/systemd/user/sockets.target.wants/brokerd.socket"
        XCTAssertEqual(try? FileManager.default.destinationOfSymbolicLink(atPath: wants),
                       "/usr/lib/systemd/user/brokerd.socket")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/systemd/user/default.target.wants/brokerd.service"))

        try checkInstalledUnitsVerify()
        try checkDBusActivationFile(prefix: "/usr")
        try checkManPagesRender()
        try checkCompletions()

        let user = TemporaryDirectory("brokerd-pkg-user")
        let state = try serveWithSwiftHidden(user: user)
        let before = try snapshot(state)

        // Installing the same package again runs the upgrade path of the maintainer scripts.
        let reinstall = try runCommand("/usr/bin/dpkg", ["-i", deb])
        XCTAssertEqual(reinstall.status, 0, reinstall.stdout + reinstall.stderr)
        XCTAssertEqual(try snapshot(state), before, "an upgrade must not touch users' state")

        let remove = try runCommand("/usr/bin/dpkg", ["-r", "brokerd"])
        XCTAssertEqual(remove.status, 0, remove.stdout + remove.stderr)
        for path in installed {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "dpkg -r left \(path)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/usr/share/doc/brokerd"))
        XCTAssertEqual(try snapshot(state), before, "dpkg -r must leave the user's cache and key alone")

        // Enabling is configuration, which Debian keeps until purge; purge removes the symlink as well.
        let purge = try runCommand("/usr/bin/dpkg", ["--purge", "brokerd"])
        XCTAssertEqual(purge.status, 0, purge.stdout + purge.stderr)
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: wants), "purge must disable the socket")
        XCTAssertEqual(try snapshot(state), before, "dpkg --purge must leave the user's cache and key alone")
        XCTAssertNotEqual(try runCommand("/usr/bin/dpkg-query", ["-W", "brokerd"]).status, 0)
    }

    /// `systemd-analyze verify` on the installed units as they are: ExecStart=/usr/bin/brokerd exists now, and
    /// Documentation=man:brokerd(8) must be found by man (no --man=no, unlike systemd/verify.sh for the sources).
    private func checkInstalledUnitsVerify() throws {
        let service = try String(contentsOfFile: "/usr/lib/systemd/user/brokerd.service", encoding: .utf8)
        XCTAssertTrue(service.contains("\nExecStart=/usr/bin/brokerd\n"), service)
        let runtime = TemporaryDirectory("brokerd-pkg-verify")
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment.removeValue(forKey: "SYSTEMD_LOG_LEVEL")
        let verify = try runCommand("/usr/bin/systemd-analyze",
                                    ["verify", "--user", "/usr/lib/systemd/user/brokerd.socket",
                                     "/usr/lib/systemd/user/brokerd.service"], environment: environment)
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        XCTAssertEqual(verify.stdout + verify.stderr, "", "systemd-analyze verify printed warnings")
    }

    /// The session bus finds brokerd by name in dbus-1/services, and starts it as brokerd.service (or runs Exec=).
    private func checkDBusActivationFile(prefix: String, root: String = "") throws {
        let path = root + prefix + "/share/dbus-1/services/com.microsoft.identity.broker1.service"
        let file = try String(contentsOfFile: path, encoding: .utf8)
        for line in ["[D-BUS Service]", "Name=com.microsoft.identity.broker1", "Exec=\(prefix)/bin/brokerd",
                     "SystemdService=brokerd.service"] {
            XCTAssertTrue(file.split(separator: "\n").contains(Substring(line)), "\(path) lacks \(line): \(file)")
        }
    }

    private func checkManPagesRender() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["MANWIDTH"] = "100"
        for (page, title) in [("/usr/share/man/man8/brokerd.8.gz", "BROKERD(8)"),
                              ("/usr/share/man/man1/brokerctl.1.gz", "BROKERCTL(1)")] {
            let man = try runCommand("/usr/bin/man", ["--warnings", "-P", "cat", "-l", page], environment: environment)
            XCTAssertEqual(man.status, 0, man.stderr)
            XCTAssertEqual(man.stderr, "", "\(page) renders with warnings")
            XCTAssertTrue(man.stdout.contains(title), man.stdout)
            XCTAssertTrue(man.stdout.contains("--socket"), "\(page) does not document --socket")
        }
        // The hand-written brokerd(8) lists every option brokerd --help has.
        let help = try runCommand("/usr/bin/brokerd", ["--help"])
        let page = try runCommand("/usr/bin/man", ["-P", "cat", "-l", "/usr/share/man/man8/brokerd.8.gz"],
                                  environment: environment)
        for option in Set(matches(of: #"--[a-z][a-z-]+"#, in: help.stdout)) {
            XCTAssertTrue(page.stdout.contains(option), "brokerd(8) does not document \(option)")
        }
    }

    private func checkCompletions() throws {
        let bash = "/usr/share/bash-completion/completions/brokerctl"
        let syntax = try runCommand("/bin/bash", ["-n", bash])
        XCTAssertEqual(syntax.status, 0, syntax.stderr)
        for (path, marker) in [(bash, "complete -"), ("/usr/share/zsh/vendor-completions/_brokerctl", "#compdef brokerctl"),
                               ("/usr/share/fish/vendor_completions.d/brokerctl.fish", "complete -c 'brokerctl'")] {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            XCTAssertTrue(text.contains(marker), "\(path) is not a brokerctl completion script")
            XCTAssertTrue(text.contains("accounts") && text.contains("signout"), "\(path) lacks the subcommands")
        }
    }

    /// The installed brokerd, socket-activated on the path the installed brokerd.socket names (%t = the user's
    /// runtime directory), answers the installed brokerctl, which finds the socket on its own; both run in a mount
    /// namespace where /opt/swift is an empty tmpfs, as on a machine without a Swift toolchain. Returns the user's
    /// state directory, filled by an import.
    private func serveWithSwiftHidden(user: TemporaryDirectory) throws -> String {
        let runtime = user.path + "/run", home = user.path + "/home"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let unit = try String(contentsOfFile: "/usr/lib/systemd/user/brokerd.socket", encoding: .utf8)
        let listen = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("ListenStream=") })
            .dropFirst("ListenStream=".count).replacingOccurrences(of: "%t", with: runtime)
        XCTAssertEqual(listen, runtime + "/brokerd/brokerd.sock")
        // What DirectoryMode=0700 makes systemd do before it binds the socket.
        try FileManager.default.createDirectory(atPath: runtime + "/brokerd", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        // A login session's environment: no Swift on PATH, no library path, no socket override.
        let environment = ["HOME": home, "XDG_RUNTIME_DIR": runtime, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]

        let hidden = try runCommand("/usr/bin/unshare", Self.hidingSwift(["/bin/ls", "-A", "/opt/swift"]),
                                    environment: environment)
        XCTAssertEqual(hidden.status, 0, "cannot hide /opt/swift (unshare --mount, mount -t tmpfs): \(hidden.stderr)")
        XCTAssertEqual(hidden.stdout, "", "/opt/swift is not empty in the namespace")
        // The control: the debug build links the Swift runtime from /opt/swift and cannot start there.
        let control = try runCommand("/usr/bin/unshare", Self.hidingSwift([Binaries.brokerd, "--version"]),
                                     environment: environment)
        XCTAssertNotEqual(control.status, 0, "/opt/swift is not hidden: a dynamically linked brokerd started")
        XCTAssertTrue(control.stderr.contains("libswift"), control.stderr)

        let version = try runCommand("/usr/bin/unshare", Self.hidingSwift(["/usr/bin/brokerd", "--version"]),
                                     environment: environment)
        XCTAssertEqual(version.status, 0, version.stderr)
        XCTAssertEqual(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines), brokerVersion)

        let log = user.path + "/brokerd.log"
        let daemon = try ChildProcess("/usr/bin/unshare", Self.hidingSwift(
            ["/usr/bin/systemd-socket-activate", "-l", listen, "/usr/bin/brokerd"]), environment: environment, logPath: log)
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL); daemon.waitUntilExit() } }
        var listening = false
        for _ in 0..<500 where !listening {
            listening = FileManager.default.fileExists(atPath: listen)
            if !listening { usleep(10_000) }
        }
        XCTAssertTrue(listening, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")

        let ctl = { (arguments: [String]) throws -> CommandResult in
            try runCommand("/usr/bin/unshare", Self.hidingSwift(["/usr/bin/brokerctl"] + arguments), environment: environment)
        }
        let versions = try ctl(["version"])
        XCTAssertEqual(versions.status, 0, versions.stderr)
        XCTAssertTrue(versions.stdout.contains("brokerd \(brokerVersion)"), versions.stdout)
        let status = try ctl(["status", "--json"])
        let daemonLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertEqual(status.status, 0, status.stderr + daemonLog)
        let decoded = try decode(StatusResult.self, status.stdout)
        XCTAssertTrue(decoded.socketActivated)
        XCTAssertEqual(decoded.socket, listen)
        XCTAssertEqual(decoded.pid, daemon.processIdentifier, "systemd-socket-activate execs brokerd in place")
        // The running daemon mapped nothing from a Swift toolchain.
        let maps = try String(contentsOfFile: "/proc/\(daemon.processIdentifier)/maps", encoding: .utf8)
        XCTAssertFalse(maps.contains("/opt/swift"), maps)
        XCTAssertTrue(maps.contains("/usr/bin/brokerd"), "pid \(daemon.processIdentifier) is not the installed brokerd")

        // Real state for the removal checks: an account imported into the user's cache.
        let cache = user.path + "/msal_cache.json"
        try CacheFixture.twoAppsTwoAccounts.json.write(toFile: cache, atomically: true, encoding: .utf8)
        let imported = try ctl(["import", cache])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let accounts = try ctl(["accounts"])
        XCTAssertTrue(accounts.stdout.contains("Alice@Contoso.example"), accounts.stdout + accounts.stderr)

        kill(daemon.processIdentifier, SIGTERM)
        daemon.waitUntilExit()
        XCTAssertEqual(daemon.terminationStatus, 0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        // The default state directory, as StateDirectory=brokerd gives it in the user unit.
        let state = home + "/.local/state/brokerd"
        XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/cache.db"), "no cache in \(state)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/cache.key"), "no key in \(state)")
        return state
    }

    /// unshare arguments that run `command` in a private mount namespace with an empty tmpfs on /opt/swift (the
    /// mount is private: the rest of the machine, this test process included, keeps seeing the toolchain).
    static func hidingSwift(_ command: [String]) -> [String] {
        ["--mount", "--propagation", "private", "/bin/sh", "-c",
         #"[ ! -d /opt/swift ] || mount -t tmpfs -o size=1m,mode=0755 no-swift /opt/swift || exit 125; exec "$@""#,
         "sh"] + command
    }

    /// The files of a state directory and their bytes.
    private func snapshot(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        XCTAssertFalse(files.isEmpty, "\(directory) is empty")
        return files
    }

    private func installedFiles() throws -> Set<String> {
        let listing = try runCommand("/usr/bin/dpkg", ["-L", "brokerd"])
        XCTAssertEqual(listing.status, 0, listing.stderr)
        var isDirectory: ObjCBool = false
        return Set(listing.stdout.split(separator: "\n").map(String.init).filter {
            $0.hasPrefix("/") && !(FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && isDirectory.boolValue)
        })
    }

    private func requireRootWithoutInstalledBrokerd() throws {
        guard getuid() == 0 else { throw missing("installing the .deb needs root") }
        if try runCommand("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "brokerd"]).stdout.contains("installed")
            || FileManager.default.fileExists(atPath: "/usr/bin/brokerd") {
            throw missing("brokerd is installed on this machine; the packaging test would replace and remove it")
        }
    }

    // MARK: - What is in the packages

    /// Both binaries link only the system's libraries, carry no symbol table, and resolve with no Swift toolchain.
    func testPackagedBinariesLinkOnlySystemLibraries() throws {
        let root = try Packages.extractedDeb()
        for name in ["brokerd", "brokerctl"] {
            let binary = root.path + "/usr/bin/" + name
            let dynamic = try runCommand("/usr/bin/readelf", ["-d", binary])
            let needed = Set(matches(of: #"(?<=Shared library: \[)[^\]]+"#, in: dynamic.stdout))
            XCTAssertFalse(needed.isEmpty, dynamic.stdout)
            XCTAssertTrue(needed.isSubset(of: Self.allowedLibraries),
                          "\(name) links \(needed.subtracting(Self.allowedLibraries).sorted())")
            let ldd = try runCommand("/usr/bin/ldd", [binary], environment: ["PATH": "/usr/bin:/bin"])
            XCTAssertEqual(ldd.status, 0, ldd.stderr)
            XCTAssertFalse(ldd.stdout.contains("not found"), ldd.stdout)
            XCTAssertFalse(ldd.stdout.contains("swift"), "\(name) resolves a Swift library: \(ldd.stdout)")
            let sections = try runCommand("/usr/bin/readelf", ["-S", "-W", binary])
            XCTAssertFalse(sections.stdout.contains(".symtab"), "\(name) is not stripped")
            let size = (try? FileManager.default.attributesOfItem(atPath: binary)[.size] as? Int) ?? 0
            print("PackagingTests: \(name) \(size / 1_048_576) MiB, links \(needed.sorted().joined(separator: " "))")
        }
        // Both need only FoundationEssentials: no ICU data (~34 MB) in either.
        for name in ["brokerd", "brokerctl"] {
            let icu = try runCommand("/bin/grep", ["-c", "FoundationInternationalization", root.path + "/usr/bin/" + name])
            XCTAssertEqual(icu.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0", "\(name) links ICU")
        }

        let depends = try runCommand("/usr/bin/dpkg-deb", ["-f", try Packages.file(suffix: ".deb"), "Depends"])
        let packages = Set(depends.stdout.split(separator: ",").compactMap {
            $0.split(separator: " ").first.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
        })
        XCTAssertTrue(packages.isSubset(of: Self.allowedDependencies),
                      "the .deb depends on \(packages.subtracting(Self.allowedDependencies).sorted())")
    }

    /// The .rpm, built from the same release build, installs the same files with the same bytes. The differences
    /// are the distributions' conventions: zsh's directory, and Debian's changelog and lintian overrides.
    func testRpmHoldsTheSameFilesAsTheDeb() throws {
        let rpm = try Packages.file(suffix: ".rpm")
        let root = try Packages.extractedDeb()
        let debListing = try runCommand("/usr/bin/find", [root.path, "-type", "f"])
        var debFiles = Set(debListing.stdout.split(separator: "\n").map { String($0.dropFirst(root.path.count)) })
        debFiles.subtract(["/usr/share/doc/brokerd/changelog.Debian.gz", "/usr/share/lintian/overrides/brokerd"])

        let query = try runCommand("/usr/bin/rpm", ["-qp", "--qf", "[%{FILEMODES:perms} %{FILEDIGESTS} %{FILENAMES}\n]", rpm])
        XCTAssertEqual(query.status, 0, query.stderr)
        var rpmFiles: [String: String] = [:]
        for line in query.stdout.split(separator: "\n") where line.hasPrefix("-") {
            let fields = line.split(separator: " ", maxSplits: 2).map(String.init)
            rpmFiles[fields[2]] = fields[1]
        }
        func debianPath(_ path: String) -> String {
            path.replacingOccurrences(of: "/usr/share/zsh/site-functions/", with: "/usr/share/zsh/vendor-completions/")
        }
        XCTAssertEqual(Set(rpmFiles.keys.map(debianPath)), debFiles)

        // The same binaries, byte for byte (rpm records SHA-256 digests of its files).
        for binary in ["/usr/bin/brokerd", "/usr/bin/brokerctl"] {
            let digest = try runCommand("/usr/bin/sha256sum", [root.path + binary])
            XCTAssertEqual(rpmFiles[binary], digest.stdout.split(separator: " ").first.map(String.init),
                           "\(binary) differs between the .rpm and the .deb")
        }
        let scripts = try runCommand("/usr/bin/rpm", ["-qp", "--scripts", rpm])
        XCTAssertTrue(scripts.stdout.contains("postinstall") && scripts.stdout.contains("brokerd.socket"), scripts.stdout)
        XCTAssertTrue(scripts.stdout.contains("preuninstall"), scripts.stdout)
    }

    /// `make install PREFIX=/usr/local` (building from source) installs the same files as the packages, with the
    /// service pointing at that prefix's brokerd; `make uninstall` removes every one of them.
    func testMakeInstallWithPrefixInstallsTheSameFiles() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let dist = repository + "/.build-release/dist"
        _ = try Packages.directory()
        guard FileManager.default.isExecutableFile(atPath: dist + "/bin/brokerd") else {
            throw Packages.Missing(description: "no release build in \(dist) (scripts/package.sh makes it)")
        }
        let destination = TemporaryDirectory("brokerd-make-install")
        let make = { (target: String) throws -> CommandResult in
            try runCommand("/usr/bin/make", ["-C", repository, "--no-print-directory", target, "DESTDIR=" + destination.path,
                                             "PREFIX=/usr/local", "DIST=" + dist])
        }
        let install = try make("install")
        XCTAssertEqual(install.status, 0, install.stdout + install.stderr)
        let listing = try runCommand("/usr/bin/find", [destination.path, "-type", "f"])
        let installed = Set(listing.stdout.split(separator: "\n").map { String($0.dropFirst(destination.path.count)) })
        let expected = Set(Packages.expectedDebFiles.map {
            $0.replacingOccurrences(of: "/usr/", with: "/usr/local/")
                .replacingOccurrences(of: "zsh/vendor-completions", with: "zsh/site-functions")
                .replacingOccurrences(of: ".gz", with: "")
        })
        XCTAssertEqual(installed, expected)
        let service = try String(contentsOfFile: destination.path + "/usr/local/lib/systemd/user/brokerd.service",
                                 encoding: .utf8)
        XCTAssertTrue(service.contains("\nExecStart=/usr/local/bin/brokerd\n"), service)
        try checkDBusActivationFile(prefix: "/usr/local", root: destination.path)
        let binary = try Data(contentsOf: URL(fileURLWithPath: destination.path + "/usr/local/bin/brokerd"))
        XCTAssertEqual(binary, try Data(contentsOf: URL(fileURLWithPath: dist + "/bin/brokerd")))

        let uninstall = try make("uninstall")
        XCTAssertEqual(uninstall.status, 0, uninstall.stdout + uninstall.stderr)
        let left = try runCommand("/usr/bin/find", [destination.path, "-type", "f"])
        XCTAssertEqual(left.stdout, "", "make uninstall left files behind")
    }

    /// package.sh already fails on a lintian error; this keeps the kept warnings to the ones docs/admin.md explains.
    func testLintianFoundNoErrorsAndOnlyExplainedWarnings() throws {
        let report = try String(contentsOfFile: try Packages.directory() + "/lintian.txt", encoding: .utf8)
        let lines = report.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.hasPrefix("E: ") }, [], report)
        let warnings = Set(lines.filter { $0.hasPrefix("W: ") }.compactMap { $0.split(separator: " ").dropFirst(2).first.map(String.init) })
        XCTAssertTrue(warnings.isSubset(of: Self.acceptedLintianWarnings),
                      "unexplained lintian warnings: \(warnings.subtracting(Self.acceptedLintianWarnings).sorted())")
    }
}

/// The artifacts of scripts/package.sh.
enum Packages {
    static let expectedDebFiles: Set<String> = [
        "/usr/bin/brokerd", "/usr/bin/brokerctl",
        "/usr/lib/systemd/user/brokerd.socket", "/usr/lib/systemd/user/brokerd.service",
        "/usr/share/dbus-1/services/com.microsoft.identity.broker1.service",
        "/usr/share/man/man8/brokerd.8.gz", "/usr/share/man/man1/brokerctl.1.gz",
        "/usr/share/bash-completion/completions/brokerctl", "/usr/share/zsh/vendor-completions/_brokerctl",
        "/usr/share/fish/vendor_completions.d/brokerctl.fish",
        "/usr/share/doc/brokerd/config.toml.example", "/usr/share/doc/brokerd/copyright",
    ]

    static func directory() throws -> String {
        guard let directory = ProcessInfo.processInfo.environment["BROKERD_PACKAGES_DIR"], !directory.isEmpty else {
            throw missing("BROKERD_PACKAGES_DIR is not set: build the packages with scripts/package.sh "
                          + "(scripts/test.sh does, and sets it)")
        }
        return directory
    }

    /// The one package file with this suffix; a missing one fails (the packages were asked for, and are not there).
    static func file(suffix: String) throws -> String {
        let directory = try directory()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasSuffix(suffix) } ?? []
        guard names.count == 1 else { throw Missing(description: "expected one *\(suffix) in \(directory), found \(names)") }
        return directory + "/" + names[0]
    }

    /// The .deb's contents, unpacked once per test run (dpkg-deb -x).
    static func extractedDeb() throws -> TemporaryDirectory {
        if let extracted = extracted { return extracted }
        let target = TemporaryDirectory("brokerd-deb")
        let unpacked = try runCommand("/usr/bin/dpkg-deb", ["-x", try file(suffix: ".deb"), target.path])
        XCTAssertEqual(unpacked.status, 0, unpacked.stderr)
        extracted = target
        return target
    }

    static func removeExtractedDeb() { extracted = nil }

    nonisolated(unsafe) private static var extracted: TemporaryDirectory?

    struct Missing: Error, CustomStringConvertible { var description: String }
}

/// Every match of `pattern` in `text`.
private func matches(of pattern: String, in text: String) -> [String] {
    guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
    let range = NSRange(text.startIndex..., in: text)
    return regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
}
