public import Foundation
public import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private, headless sway session on Wayland for one test suite, run as an unprivileged user
/// (sway 1.7 refuses root: "Unable to drop root"): its own session bus (`dbus-daemon`), sway with
/// wlroots' headless backend and pixman renderer (no GPU) and one output, PipeWire with WirePlumber
/// and pipewire-pulse, and xdg-desktop-portal with its wlroots backend (xdg-desktop-portal-wlr),
/// activated on the session bus, configured to share the output without asking (`chooser_type=none`).
///
/// xdg-desktop-portal-wlr 0.7 refuses to start a screen cast unless the compositor offers dmabuf
/// screencopy, which a GPU-less wlroots does not; ``Configuration/xdpwShim`` is the source of a small
/// `LD_PRELOAD` shim that makes it work with shared memory: it is compiled with `cc` into the
/// session's folder at start (nothing built is kept).
///
/// Run as root, every process of the session runs as ``Configuration/user`` (nobody, 65534, by
/// default) through `setpriv`, in one folder that user owns (mode 0700: `XDG_RUNTIME_DIR`, `HOME`,
/// the `XDG_*_HOME` folders, the recordings). Run as another user, they run as that user. The built
/// `replay`, `replayd` and `replay-testapp` are used where they are if that user can run them
/// there, else copied into the folder (``binaryDirectory``).
///
/// Clients get ``environment`` and run as the user with ``run(_:arguments:environment:timeout:)``
/// and ``startClient(_:arguments:environment:)``: the `replay` run so starts this session's own
/// replayd, which records sway through the portal. There is no X display (no Xwayland).
///
/// Use ``with(_:logger:_:)``: it stops every process the session started (each one's process
/// group, then any process left with this session's `XDG_RUNTIME_DIR`) and removes the folder,
/// however the body ends.
public final class SwaySession: DesktopRig {
    public struct Configuration: Sendable {
        /// The output's size.
        public var width: Int
        public var height: Int
        /// How long the whole start may take.
        public var startTimeout: Duration
        /// The C source of the shim xdg-desktop-portal-wlr 0.7 needs without a GPU (see above); nil:
        /// the portal's backend runs as installed.
        public var xdpwShim: String?
        /// Who runs the session when we are root (sway refuses root).
        public var user: (uid: uid_t, gid: gid_t)

        public init(width: Int = 1280, height: Int = 720, startTimeout: Duration = .seconds(60), xdpwShim: String? = nil,
                    user: (uid: uid_t, gid: gid_t) = (65534, 65534)) {
            self.width = width
            self.height = height
            self.startTimeout = startTimeout
            self.xdpwShim = xdpwShim
            self.user = user
        }
    }

    /// sway's output (wlroots' headless backend names its first output so).
    public static let outputName = "HEADLESS-1"

    public let configuration: Configuration
    /// The session's folder, owned by the user; everything below is removed at tear-down.
    public let directory: URL
    /// `XDG_RUNTIME_DIR` (0700): the Wayland, sway IPC, PipeWire, pulse and session bus sockets.
    public let runtimeDirectory: URL
    public let homeDirectory: URL
    /// `XDG_STATE_HOME` (where replayd keeps the portal's restore token).
    public let stateDirectory: URL
    /// A folder for recordings (also `XDG_VIDEOS_DIR`).
    public let outputDirectory: URL
    /// Where `replay`, `replayd` and `replay-testapp` are run from: the build's folder, or a copy.
    public let binaryDirectory: URL
    /// The uid the session's processes run as.
    public let uid: uid_t
    /// The Wayland socket's name, as sway chose it (`wayland-1`).
    public let waylandDisplay: String
    /// What a client of this session needs: `WAYLAND_DISPLAY`, `SWAYSOCK`, `XDG_RUNTIME_DIR`,
    /// `DBUS_SESSION_BUS_ADDRESS`, `PULSE_SERVER` (pipewire-pulse), `HOME`, `USER` and the `XDG_*_HOME`
    /// folders, `XDG_CURRENT_DESKTOP=sway`, `XDG_SESSION_TYPE=wayland`, over ours without any other
    /// display's or session's variables (no `DISPLAY`).
    public let environment: [String: String]
    private let daemons: [RigDaemon]
    private let clients = Mutex<[BackgroundProcess]>([])
    /// `setpriv …` when the session runs as another user than ours.
    private let asUser: [String]
    private let logger: Logger

    private init(configuration: Configuration, directory: URL, binaryDirectory: URL, uid: uid_t, waylandDisplay: String,
                 environment: [String: String], daemons: [RigDaemon], asUser: [String], logger: Logger) {
        self.configuration = configuration
        self.directory = directory
        self.runtimeDirectory = directory.appendingPathComponent("runtime")
        self.homeDirectory = directory.appendingPathComponent("home")
        self.stateDirectory = directory.appendingPathComponent("home/.local/state")
        self.outputDirectory = directory.appendingPathComponent("home/Videos")
        self.binaryDirectory = binaryDirectory
        self.uid = uid
        self.waylandDisplay = waylandDisplay
        self.environment = environment
        self.daemons = daemons
        self.asUser = asUser
        self.logger = logger
    }

    // MARK: Logs

    /// What sway has written so far.
    public var compositorLog: String { log(of: "sway") }
    /// What the session bus and the services it activated (xdg-desktop-portal, xdg-desktop-portal-wlr)
    /// have written so far.
    public var sessionBusLog: String { log(of: "session bus") }

    /// The output of the daemon named `name` ("session bus", "sway", "pipewire", "wireplumber",
    /// "pipewire-pulse"), standard error then standard output.
    public func log(of name: String) -> String {
        daemons.first(where: { $0.name == name })?.log ?? ""
    }

    /// The end of every daemon's log, for a failure message.
    public func logTails(lines: Int = 40) -> String {
        RigDaemon.tails(of: daemons, lines: lines, first: "sway")
    }

    // MARK: Start and stop

    /// Starts the session and waits until sway has read its configuration, PipeWire's pulse layer
    /// answers with a default sink and the ScreenCast portal answers; on failure what was started is
    /// stopped again.
    public static func start(_ configuration: Configuration = Configuration(), logger: Logger = .harness) async throws -> SwaySession {
        let began = ContinuousClock.now
        let deadline = began + configuration.startTimeout
        let directory = try makeTemporaryDirectory(prefix: "ork-sway")
        let runtime = directory.appendingPathComponent("runtime")
        let home = directory.appendingPathComponent("home")
        let root = getuid() == 0
        let (uid, gid) = root ? configuration.user : (getuid(), getgid())
        let asUser = root ? ["setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"] : []
        var daemons: [RigDaemon] = []
        do {
            let fileManager = FileManager.default
            try fileManager.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for folder in [".config/sway", ".config/xdg-desktop-portal-wlr", ".local/share", ".local/state", ".cache", "Videos"] {
                try fileManager.createDirectory(at: home.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            // sway's configuration: one output, no Xwayland, no borders; once read, it writes the
            // variables it gives its children (WAYLAND_DISPLAY, SWAYSOCK) where we wait for them.
            let swayReady = runtime.appendingPathComponent("sway.env")
            try """
                output \(outputName) resolution \(configuration.width)x\(configuration.height) position 0,0 bg #336699 solid_color
                xwayland disable
                default_border none
                exec sh -c 'printf "WAYLAND_DISPLAY=%s\\nSWAYSOCK=%s\\n" "$WAYLAND_DISPLAY" "$SWAYSOCK" > \(swayReady.path).part && mv \(swayReady.path).part \(swayReady.path)'

                """.write(to: home.appendingPathComponent(".config/sway/config"), atomically: true, encoding: .utf8)
            // The portal's wlroots backend: this output, no chooser (no dialog to answer).
            try "[screencast]\noutput_name=\(outputName)\nmax_fps=30\nchooser_type=none\n"
                .write(to: home.appendingPathComponent(".config/xdg-desktop-portal-wlr/config"), atomically: true, encoding: .utf8)
            // D-Bus activation overrides go in $XDG_RUNTIME_DIR/dbus-1/services (dbus ignores $HOME for
            // these): the portal's backend with the shim; the Documents portal (a FUSE mount) never.
            let services = runtime.appendingPathComponent("dbus-1/services")
            try fileManager.createDirectory(at: services, withIntermediateDirectories: true)
            try "[D-BUS Service]\nName=org.freedesktop.portal.Documents\nExec=/bin/false\n"
                .write(to: services.appendingPathComponent("org.freedesktop.portal.Documents.service"), atomically: true, encoding: .utf8)
            if let source = configuration.xdpwShim {
                let shim = directory.appendingPathComponent("xdpw-shm-shim.so").path
                let compiled = try await ProcessRunner.run("cc", arguments: ["-shared", "-fPIC", "-O2", "-o", shim, source, "-ldl"],
                                                           timeout: .seconds(60))
                guard compiled.succeeded else { throw HarnessError("cannot compile the xdg-desktop-portal-wlr shim \(source): \(compiled)") }
                try """
                    [D-BUS Service]
                    Name=org.freedesktop.impl.portal.desktop.wlr
                    Exec=/usr/bin/env LD_PRELOAD=\(shim) /usr/libexec/xdg-desktop-portal-wlr --loglevel INFO

                    """.write(to: services.appendingPathComponent("org.freedesktop.impl.portal.desktop.wlr.service"),
                              atomically: true, encoding: .utf8)
            }
            let pulseConfig = directory.appendingPathComponent("pulse-client.conf")
            try "autospawn = no\n".write(to: pulseConfig, atomically: true, encoding: .utf8)
            try chown(tree: directory, uid: uid, gid: gid)
            let binaries = try await reachableBinaries(asUser: asUser, directory: directory, uid: uid, gid: gid)

            let sessionSocket = runtime.appendingPathComponent("bus").path
            var environment = clientEnvironment(runtime: runtime, home: home, sessionSocket: sessionSocket, pulseConfig: pulseConfig.path, uid: uid)

            func fail(_ what: String) -> HarnessError {
                HarnessError("the headless sway session did not start: \(what) (after \(RigDaemon.seconds(since: began)))\n\(RigDaemon.tails(of: daemons, lines: 40, first: "sway"))")
            }
            func launch(_ name: String, _ executable: String, _ arguments: [String], extra: [String: String] = [:]) throws {
                let command = asUser + [try ProcessRunner.resolve(executable)] + arguments
                daemons.append(RigDaemon(name: name, process: try BackgroundProcess(
                    command[0], arguments: Array(command.dropFirst()), environment: environment.merging(extra) { $1 },
                    workingDirectory: home.path)))
            }
            func run(_ executable: String, _ arguments: [String]) async throws -> ProcessResult {
                let command = asUser + [executable] + arguments
                return try await ProcessRunner.run(command[0], arguments: Array(command.dropFirst()), environment: environment,
                                                   workingDirectory: home.path, timeout: .seconds(30))
            }
            /// Polls `ready` until it holds; fails when the deadline passes or a daemon has exited.
            func waitUntil(_ what: @autoclosure () -> String, _ ready: () async -> Bool) async throws {
                while true {
                    if await ready() { return }
                    if let dead = daemons.first(where: { !$0.process.isRunning }) {
                        throw fail("\(dead.name) exited while waiting for \(what())")
                    }
                    if ContinuousClock.now >= deadline { throw fail("\(what()) not within \(configuration.startTimeout)") }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            func exists(_ path: String) -> Bool { fileManager.fileExists(atPath: path) }
            func milestone(_ what: String) {
                logger.debug("sway session: \(what)", metadata: ["after": "\(RigDaemon.seconds(since: began))"])
            }

            try launch("session bus", "dbus-daemon", ["--session", "--address=unix:path=\(sessionSocket)", "--nofork",
                                                      "--nopidfile", "--nosyslog", "--print-address=1"])
            try await waitUntil("the session bus") { !daemons[0].process.currentOutput.isEmpty && exists(sessionSocket) }
            milestone("bus")

            // wlroots without a GPU, a seat or input devices.
            try launch("sway", "sway", ["--config", home.appendingPathComponent(".config/sway/config").path],
                       extra: ["WLR_BACKENDS": "headless", "WLR_RENDERER": "pixman", "WLR_LIBINPUT_NO_DEVICES": "1",
                               "WLR_HEADLESS_OUTPUTS": "1"])
            try await waitUntil("sway's configuration (\(swayReady.lastPathComponent))") { exists(swayReady.path) }
            let given = try String(contentsOf: swayReady, encoding: .utf8).split(separator: "\n").reduce(into: [String: String]()) { found, line in
                let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2, !parts[1].isEmpty { found[parts[0]] = parts[1] }
            }
            guard let display = given["WAYLAND_DISPLAY"], let swaySocket = given["SWAYSOCK"] else {
                throw fail("sway gave no WAYLAND_DISPLAY or SWAYSOCK: \(given)")
            }
            environment["WAYLAND_DISPLAY"] = display
            environment["SWAYSOCK"] = swaySocket
            milestone("sway")
            // Services the session bus activates from now on get the display.
            let update = try await run("/usr/bin/dbus-update-activation-environment", [
                "WAYLAND_DISPLAY", "SWAYSOCK", "XDG_CURRENT_DESKTOP", "XDG_SESSION_TYPE", "XDG_SESSION_DESKTOP",
            ])
            guard update.succeeded else { throw fail("dbus-update-activation-environment failed: \(update)") }

            try launch("pipewire", "pipewire", [])
            try await waitUntil("PipeWire's socket") { exists(runtime.appendingPathComponent("pipewire-0").path) }
            try launch("wireplumber", "wireplumber", [])
            try launch("pipewire-pulse", "pipewire-pulse", [])
            try await waitUntil("pipewire-pulse's socket") { exists(runtime.appendingPathComponent("pulse/native").path) }
            milestone("pipewire")

            let session = SwaySession(configuration: configuration, directory: directory, binaryDirectory: binaries, uid: uid,
                                      waylandDisplay: display, environment: environment, daemons: daemons, asUser: asUser,
                                      logger: logger)
            try await session.setUpSound()
            milestone("sound")
            // Activates xdg-desktop-portal, which starts its wlroots backend.
            var lastAnswer = "none"
            try await waitUntil("the ScreenCast portal (its last answer: \(lastAnswer))") {
                let answer = try? await session.run("gdbus", arguments: [
                    "call", "--session", "--dest", "org.freedesktop.portal.Desktop", "--object-path", "/org/freedesktop/portal/desktop",
                    "--method", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.portal.ScreenCast", "version",
                ], timeout: .seconds(30))
                lastAnswer = answer.map { $0.stdout + $0.stderr } ?? "none"
                return answer?.succeeded == true
            }
            milestone("portal")
            logger.info("sway session ready", metadata: ["folder": "\(directory.path)", "uid": "\(uid)",
                                                         "after": "\(RigDaemon.seconds(since: began))"])
            return session
        } catch {
            await stop(Array(daemons.reversed()), clients: [], runtime: runtime, logger: logger)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Starts a session with the default configuration, runs `body` with it and tears it down (``DesktopRig``).
    public static func with<T: Sendable>(logger: Logger = .harness, _ body: (SwaySession) async throws -> T) async throws -> T {
        try await with(Configuration(), logger: logger, body)
    }

    /// Stops the clients, then sway, PipeWire and the bus (each one's whole process group: the
    /// services the session bus activated are in its group), then any process left with this
    /// session's `XDG_RUNTIME_DIR` (a replayd that `replay` started); removes the folder.
    /// With `ORK_KEEP_RECORDINGS=DIR` the recordings, replayd's log and the session's logs are moved
    /// to a folder in DIR first.
    public func tearDown() async {
        await Self.stop(Array(daemons.reversed()), clients: clients.withLock { $0 }, runtime: runtimeDirectory, logger: logger)
        RigDaemon.keepRecordings(from: outputDirectory, runtime: runtimeDirectory, daemons: daemons, directory: directory, logger: logger)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Processes still running with this session's `XDG_RUNTIME_DIR`.
    public func leftoverProcesses() -> [Int32] {
        ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtimeDirectory.path)
    }

    private static func stop(_ daemons: [RigDaemon], clients: [BackgroundProcess], runtime: URL, logger: Logger) async {
        // Clients first, the compositor before the bus its portal talks on.
        let order = daemons.filter { $0.name == "sway" } + daemons.filter { $0.name != "sway" }
        await RigDaemon.stop(order, clients: clients, runtime: runtime, label: "sway session", logger: logger)
    }

    // MARK: Clients

    /// The path of a built executable (`replay`, `replayd`, `replay-testapp`) the session's user can run.
    public func binary(_ name: String) -> String {
        binaryDirectory.appendingPathComponent(name).path
    }

    /// `environment` with `overrides` applied (a nil value removes the variable).
    public func environment(with overrides: [String: String?]) -> [String: String] {
        var result = environment
        for (key, value) in overrides { result[key] = value }
        return result
    }

    /// Starts a client of the session, as the session's user, in the background; it is stopped
    /// (with its process group) at tear-down if still running. Its `pid` is `setpriv`'s, which
    /// becomes the client (it execs it).
    public func startClient(_ executable: String, arguments: [String] = [], environment overrides: [String: String?] = [:]) throws -> BackgroundProcess {
        let command = asUser + [try ProcessRunner.resolve(executable, environment: environment)] + arguments
        let process = try BackgroundProcess(command[0], arguments: Array(command.dropFirst()), environment: environment(with: overrides),
                                            workingDirectory: homeDirectory.path)
        clients.withLock { $0.append(process) }
        logger.debug("sway session: client started", metadata: ["executable": "\(executable)", "arguments": "\(arguments)", "pid": "\(process.pid)"])
        return process
    }

    /// Runs a client of the session, as the session's user, to completion.
    public func run(_ executable: String, arguments: [String] = [], environment overrides: [String: String?] = [:],
                    timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        let command = asUser + [try ProcessRunner.resolve(executable, environment: environment)] + arguments
        return try await ProcessRunner.run(command[0], arguments: Array(command.dropFirst()), environment: environment(with: overrides),
                                           workingDirectory: homeDirectory.path, timeout: timeout)
    }

    /// Stops a client started with ``startClient(_:arguments:environment:)`` and its process group.
    public func stopClient(_ process: BackgroundProcess) async {
        await RigDaemon.terminateGroup(of: process)
    }

    /// `swaymsg ARGUMENTS` over this session's IPC socket.
    public func swaymsg(_ arguments: [String]) async throws -> ProcessResult {
        try await run("swaymsg", arguments: arguments, timeout: .seconds(20))
    }

    /// `pactl ARGUMENTS` against pipewire-pulse.
    public func pactl(_ arguments: [String]) async throws -> ProcessResult {
        try await run("pactl", arguments: arguments, timeout: .seconds(20))
    }

    /// A null sink `main`, the default (what the computer plays), as ``GnomeSession`` has.
    private func setUpSound() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let info = try await pactl(["info"])
            if info.succeeded { break }
            if ContinuousClock.now >= deadline { throw HarnessError("pipewire-pulse did not answer `pactl info`: \(info)\n\(logTails())") }
            try await Task.sleep(for: .milliseconds(100))
        }
        let load = try await pactl(["load-module", "module-null-sink", "sink_name=main", "rate=48000",
                                    "sink_properties=device.description=Main"])
        guard load.succeeded else { throw HarnessError("pactl load-module module-null-sink failed: \(load)") }
        while true {
            _ = try await pactl(["set-default-sink", "main"])
            let info = try await pactl(["info"])
            if info.stdout.contains("Default Sink: main") { return }
            if ContinuousClock.now >= deadline { throw HarnessError("the default sink is not `main`: \(info)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: Set-up

    /// Gives `tree` (a folder and all below it) to `uid`:`gid`.
    private static func chown(tree: URL, uid: uid_t, gid: gid_t) throws {
        var paths = [tree.path]
        if let walker = FileManager.default.enumerator(atPath: tree.path) {
            while let relative = walker.nextObject() as? String { paths.append(tree.path + "/" + relative) }
        }
        for path in paths where lchown(path, uid, gid) != 0 {
            throw HarnessError("cannot give \(path) to uid \(uid): \(String(cString: strerror(errno)))")
        }
    }

    /// The folder of the built `replay`, `replayd` and `replay-testapp` if the user can run them
    /// there (every folder on the way searchable, the files executable), else a copy of the three
    /// in `directory/bin` (replay finds replayd beside itself; they load the Swift runtime from its
    /// installed place).
    private static func reachableBinaries(asUser: [String], directory: URL, uid: uid_t, gid: gid_t) async throws -> URL {
        let names = ["replay", "replayd", "replay-testapp"]
        let built = try names.map { try Binaries.path($0) }
        guard !asUser.isEmpty else { return Binaries.directory }
        let test = asUser + ["/usr/bin/test"]
        var reachable = true
        for path in built {
            let result = try await ProcessRunner.run(test[0], arguments: Array(test.dropFirst()) + ["-x", path, "-a", "-r", path],
                                                     timeout: .seconds(10))
            if !result.succeeded { reachable = false }
        }
        if reachable { return URL(fileURLWithPath: built[0]).deletingLastPathComponent() }
        let bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        for (name, path) in zip(names, built) {
            try Binaries.copyExecutable(from: path, to: bin.appendingPathComponent(name).path)
        }
        try chown(tree: bin, uid: uid, gid: gid)
        return bin
    }

    private static func clientEnvironment(runtime: URL, home: URL, sessionSocket: String, pulseConfig: String, uid: uid_t) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !(key.hasPrefix("XDG_") || key.hasPrefix("PULSE_") || key.hasPrefix("DBUS_") || key.hasPrefix("GNOME_")
              || key.hasPrefix("LC_") || key.hasPrefix("WLR_") || key.hasPrefix("SWAY")
              || ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET", "XAUTHORITY", "HOME", "USER", "LOGNAME", "TERM",
                  "NO_AT_BRIDGE", "GTK_A11Y", "GDK_BACKEND", "GSETTINGS_BACKEND", "SESSION_MANAGER", "LANGUAGE",
                  "ORK_BIN_DIR", "I3SOCK"].contains(key))
        }
        let user = getpwuid(uid).map { String(cString: $0.pointee.pw_name) } ?? "\(uid)"
        environment["USER"] = user
        environment["LOGNAME"] = user
        environment["LANG"] = "C.UTF-8"
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        environment["XDG_STATE_HOME"] = home.appendingPathComponent(".local/state").path
        environment["XDG_CACHE_HOME"] = home.appendingPathComponent(".cache").path
        environment["XDG_VIDEOS_DIR"] = home.appendingPathComponent("Videos").path
        environment["XDG_CURRENT_DESKTOP"] = "sway"
        environment["XDG_SESSION_TYPE"] = "wayland"
        environment["XDG_SESSION_DESKTOP"] = "sway"
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(sessionSocket)"
        environment["PULSE_SERVER"] = "unix:\(runtime.appendingPathComponent("pulse/native").path)"
        environment["PULSE_CLIENTCONFIG"] = pulseConfig
        return environment
    }
}
