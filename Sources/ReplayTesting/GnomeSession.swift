public import Foundation
public import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private, headless GNOME session on Wayland for one test suite: a system bus and a session bus
/// of its own (`dbus-daemon`), PipeWire with WirePlumber and pipewire-pulse (so that libpulse
/// clients, replayd among them, play and record through PipeWire), and `gnome-shell --headless
/// --wayland --virtual-monitor`, whose session bus activates xdg-desktop-portal with its GNOME
/// backend and the accessibility bus (AT-SPI) on demand. Everything lives in one temporary folder
/// (mode 0700) that holds `XDG_RUNTIME_DIR`, `HOME` and the `XDG_*_HOME` folders; nothing of the
/// machine's own session is touched or used.
///
/// Clients get ``environment``: run the built `replay` with it and the `replayd` it starts is this
/// session's own, records it through the portal and hears it through pipewire-pulse, whose default
/// sink is a null sink `main` (what the computer plays; without hardware PipeWire has none). There is no
/// X display in it (gnome-shell runs with `--no-x11` unless asked otherwise): a Wayland session
/// must be captured as one.
///
/// Use ``with(_:logger:_:)``: it stops every process the session started (each one's process
/// group, then any process left with this session's `XDG_RUNTIME_DIR`) and removes the folder,
/// however the body ends. On 2 cores the session takes 15–100 s to come up; every wait is bounded
/// by ``Configuration/startTimeout`` and a failure quotes the compositor's log.
public final class GnomeSession: DesktopRig {
    public struct Configuration: Sendable {
        /// The virtual monitor's size.
        public var width: Int
        public var height: Int
        /// How long the whole start may take.
        public var startTimeout: Duration
        /// Xwayland for X11 clients (gnome-shell starts it on demand). Its display is
        /// ``x11Display``, never in ``environment``.
        public var xwayland: Bool
        /// GNOME Shell extensions (each a folder named by its uuid, e.g. dist/gnome-shell/openreplaykit@openreplaykit.org)
        /// copied into the session's `XDG_DATA_HOME/gnome-shell/extensions` and enabled before gnome-shell starts.
        public var shellExtensions: [URL] = []

        public init(width: Int = 1280, height: Int = 720, startTimeout: Duration = .seconds(150), xwayland: Bool = false) {
            self.width = width
            self.height = height
            self.startTimeout = startTimeout
            self.xwayland = xwayland
        }
    }

    public let configuration: Configuration
    /// The session's folder; everything below is removed at tear-down.
    public let directory: URL
    /// `XDG_RUNTIME_DIR` (0700): the Wayland, PipeWire, pulse and session bus sockets.
    public let runtimeDirectory: URL
    public let homeDirectory: URL
    /// `XDG_STATE_HOME` (where replayd keeps the portal's restore token).
    public let stateDirectory: URL
    /// A folder for recordings (also `XDG_VIDEOS_DIR`).
    public let outputDirectory: URL
    /// The Wayland socket's name, `wayland-0`.
    public let waylandDisplay: String
    /// What a client of this session needs: `WAYLAND_DISPLAY`, `XDG_RUNTIME_DIR`,
    /// `DBUS_SESSION_BUS_ADDRESS`, `DBUS_SYSTEM_BUS_ADDRESS`, `PULSE_SERVER` (pipewire-pulse),
    /// `HOME` and the `XDG_*_HOME` folders, `XDG_CURRENT_DESKTOP=GNOME`, `XDG_SESSION_TYPE=wayland`,
    /// over ours without any other display's or session's variables (no `DISPLAY`).
    public let environment: [String: String]
    private let daemons: [RigDaemon]
    private let clients = Mutex<[BackgroundProcess]>([])
    private let logger: Logger

    private init(configuration: Configuration, directory: URL, waylandDisplay: String, environment: [String: String],
                 daemons: [RigDaemon], logger: Logger) {
        self.configuration = configuration
        self.directory = directory
        self.runtimeDirectory = directory.appendingPathComponent("runtime")
        self.homeDirectory = directory.appendingPathComponent("home")
        self.stateDirectory = directory.appendingPathComponent("home/.local/state")
        self.outputDirectory = directory.appendingPathComponent("home/Videos")
        self.waylandDisplay = waylandDisplay
        self.environment = environment
        self.daemons = daemons
        self.logger = logger
    }

    // MARK: Logs

    /// What gnome-shell (mutter) has written so far.
    public var compositorLog: String { log(of: "gnome-shell") }
    /// What the session bus and the services it activated (xdg-desktop-portal, its GNOME backend,
    /// the accessibility bus) have written so far.
    public var sessionBusLog: String { log(of: "session bus") }

    /// The output of the daemon named `name` ("system bus", "session bus", "pipewire", "wireplumber",
    /// "pipewire-pulse", "gnome-shell"), standard error then standard output.
    public func log(of name: String) -> String {
        daemons.first(where: { $0.name == name })?.log ?? ""
    }

    /// The end of every daemon's log, for a failure message.
    public func logTails(lines: Int = 40) -> String {
        RigDaemon.tails(of: daemons, lines: lines, first: "gnome-shell")
    }

    /// Xwayland's display (`:N`) when ``Configuration/xwayland`` is on and gnome-shell has said it.
    public var x11Display: String? {
        guard configuration.xwayland else { return nil }
        // "Using public X11 display :1024, (using :1025 for managed services)"
        guard let range = compositorLog.range(of: "Using public X11 display :") else { return nil }
        let number = compositorLog[range.upperBound...].prefix { $0.isNumber }
        return number.isEmpty ? nil : ":\(number)"
    }

    // MARK: Start and stop

    /// Starts the session and waits until gnome-shell has finished starting up, its overview is
    /// hidden and the ScreenCast portal answers; on failure what was started is stopped again.
    public static func start(_ configuration: Configuration = Configuration(), logger: Logger = .harness) async throws -> GnomeSession {
        let began = ContinuousClock.now
        let deadline = began + configuration.startTimeout
        let directory = try makeTemporaryDirectory(prefix: "ork-gnome")
        let runtime = directory.appendingPathComponent("runtime")
        let home = directory.appendingPathComponent("home")
        let waylandDisplay = "wayland-0"
        var daemons: [RigDaemon] = []
        do {
            let fileManager = FileManager.default
            try fileManager.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for folder in [".config", ".local/share", ".local/state", ".cache", "Videos"] {
                try fileManager.createDirectory(at: home.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            // The Documents portal would mount a FUSE file system in $XDG_RUNTIME_DIR/doc: never
            // activated. Overrides go in $XDG_RUNTIME_DIR/dbus-1/services (dbus ignores $HOME for these).
            let services = runtime.appendingPathComponent("dbus-1/services")
            try fileManager.createDirectory(at: services, withIntermediateDirectories: true)
            try "[D-BUS Service]\nName=org.freedesktop.portal.Documents\nExec=/bin/false\n"
                .write(to: services.appendingPathComponent("org.freedesktop.portal.Documents.service"), atomically: true, encoding: .utf8)
            let pulseConfig = directory.appendingPathComponent("pulse-client.conf")
            try "autospawn = no\n".write(to: pulseConfig, atomically: true, encoding: .utf8)

            let systemSocket = directory.appendingPathComponent("system_bus_socket").path
            let sessionSocket = runtime.appendingPathComponent("bus").path
            let environment = clientEnvironment(runtime: runtime, home: home, systemSocket: systemSocket,
                                                sessionSocket: sessionSocket, waylandDisplay: waylandDisplay,
                                                pulseConfig: pulseConfig.path)
            // What the session's daemons run with: the client environment without WAYLAND_DISPLAY (the
            // compositor makes the display; the bus learns it through dbus-update-activation-environment).
            var daemonEnvironment = environment
            daemonEnvironment["WAYLAND_DISPLAY"] = nil

            func fail(_ what: String) -> HarnessError {
                HarnessError("the headless GNOME session did not start: \(what) (after \(RigDaemon.seconds(since: began)))\n\(RigDaemon.tails(of: daemons, lines: 40, first: "gnome-shell"))")
            }
            func launch(_ name: String, _ executable: String, _ arguments: [String]) throws {
                daemons.append(RigDaemon(name: name, process: try BackgroundProcess(executable, arguments: arguments,
                                                                                 environment: daemonEnvironment,
                                                                                 workingDirectory: home.path)))
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
                logger.debug("GNOME session: \(what)", metadata: ["after": "\(RigDaemon.seconds(since: began))"])
            }

            // The buses. gnome-shell needs a system bus: a private, empty one. `--print-address` is
            // printed once the bus listens.
            let systemConfig = directory.appendingPathComponent("system-bus.conf")
            try systemBusConfiguration(socket: systemSocket).write(to: systemConfig, atomically: true, encoding: .utf8)
            try launch("system bus", "dbus-daemon", ["--config-file=\(systemConfig.path)", "--nofork", "--nopidfile",
                                                     "--nosyslog", "--print-address=1"])
            try launch("session bus", "dbus-daemon", ["--session", "--address=unix:path=\(sessionSocket)", "--nofork",
                                                      "--nopidfile", "--nosyslog", "--print-address=1"])
            try await waitUntil("the buses") {
                daemons.prefix(2).allSatisfy { !$0.process.currentOutput.isEmpty } && exists(systemSocket) && exists(sessionSocket)
            }
            milestone("buses")

            // Sound and screencast streams.
            try launch("pipewire", "pipewire", [])
            try await waitUntil("PipeWire's socket") { exists(runtime.appendingPathComponent("pipewire-0").path) }
            try launch("wireplumber", "wireplumber", [])
            try launch("pipewire-pulse", "pipewire-pulse", [])
            milestone("pipewire")

            // Settings before the shell reads them (dconf, activated on the session bus).
            for (schema, key, value) in shellSettings {
                let result = try await ProcessRunner.run("gsettings", arguments: ["set", schema, key, value],
                                                         environment: daemonEnvironment, timeout: .seconds(30))
                guard result.succeeded else { throw fail("gsettings set \(schema) \(key) \(value) failed: \(result)") }
            }
            milestone("settings")
            if !configuration.shellExtensions.isEmpty {
                let folder = home.appendingPathComponent(".local/share/gnome-shell/extensions")
                try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
                for source in configuration.shellExtensions {
                    try fileManager.copyItem(at: source, to: folder.appendingPathComponent(source.lastPathComponent))
                }
                let uuids = configuration.shellExtensions.map { "'\($0.lastPathComponent)'" }.joined(separator: ", ")
                for (key, value) in [("disable-user-extensions", "false"), ("enabled-extensions", "[\(uuids)]")] {
                    let result = try await ProcessRunner.run("gsettings", arguments: ["set", "org.gnome.shell", key, value],
                                                             environment: daemonEnvironment, timeout: .seconds(30))
                    guard result.succeeded else { throw fail("gsettings set org.gnome.shell \(key) \(value) failed: \(result)") }
                }
                milestone("shell extensions")
            }

            var shellArguments = ["--headless", "--wayland", "--wayland-display", waylandDisplay,
                                  "--virtual-monitor", "\(configuration.width)x\(configuration.height)"]
            if !configuration.xwayland { shellArguments.append("--no-x11") }
            try launch("gnome-shell", "gnome-shell", shellArguments)
            try await waitUntil("the Wayland socket \(waylandDisplay)") { exists(runtime.appendingPathComponent(waylandDisplay).path) }
            milestone("wayland socket")
            // Services the session bus activates from now on get the display.
            let update = try await ProcessRunner.run("dbus-update-activation-environment", arguments: [
                "WAYLAND_DISPLAY", "XDG_CURRENT_DESKTOP", "XDG_SESSION_TYPE", "XDG_SESSION_DESKTOP",
            ], environment: environment, timeout: .seconds(30))
            guard update.succeeded else { throw fail("dbus-update-activation-environment failed: \(update)") }

            // gnome-shell logs this line at the end of its startup animation (which opens the overview).
            let shell = daemons.last!.process
            try await waitUntil("gnome-shell's startup (\"GNOME Shell started\" in its log)") {
                shell.currentError.contains("GNOME Shell started at")
            }
            milestone("shell started")

            let session = GnomeSession(configuration: configuration, directory: directory, waylandDisplay: waylandDisplay,
                                       environment: environment, daemons: daemons, logger: logger)
            // The desktop, not the overview it starts in: a window opened now fills the screen.
            try await waitUntil("the overview to hide") {
                guard (try? await session.setOverviewActive(false)) != nil else { return false }
                return (try? await session.isOverviewActive()) == false
            }
            milestone("overview hidden")
            try await waitUntil("pipewire-pulse's socket") {
                exists(runtime.appendingPathComponent("pulse/native").path)
            }
            try await session.setUpSound()
            milestone("sound")
            // Activates xdg-desktop-portal, which starts its GNOME backend: the ScreenCast interface is
            // there only when the backend runs on this display.
            var lastAnswer = "none"
            try await waitUntil("the ScreenCast portal (its last answer: \(lastAnswer))") {
                let answer = try? await session.gdbus(["call", "--session", "--dest", "org.freedesktop.portal.Desktop",
                                                       "--object-path", "/org/freedesktop/portal/desktop", "--method",
                                                       "org.freedesktop.DBus.Properties.Get", "org.freedesktop.portal.ScreenCast",
                                                       "version"], timeout: .seconds(30))
                lastAnswer = answer.map { $0.stdout + $0.stderr } ?? "none"
                return answer?.succeeded == true
            }
            milestone("portal")
            logger.info("GNOME session ready", metadata: ["folder": "\(directory.path)", "after": "\(RigDaemon.seconds(since: began))"])
            return session
        } catch {
            await stop(Array(daemons.reversed()), clients: [], runtime: runtime, logger: logger)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Starts a session with the default configuration, runs `body` with it and tears it down (``DesktopRig``).
    public static func with<T: Sendable>(logger: Logger = .harness, _ body: (GnomeSession) async throws -> T) async throws -> T {
        try await with(Configuration(), logger: logger, body)
    }

    /// Stops the clients, then gnome-shell, PipeWire and the buses (each one's whole process group:
    /// the services the session bus activated are in its group), then any process left with this
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
        // Clients first (they would complain about their compositor going), the compositor before
        // the buses it talks to.
        let order = daemons.filter { $0.name == "gnome-shell" } + daemons.filter { $0.name != "gnome-shell" }
        await RigDaemon.stop(order, clients: clients, runtime: runtime, label: "GNOME session", logger: logger)
    }

    // MARK: Clients

    /// `environment` with `overrides` applied (a nil value removes the variable).
    public func environment(with overrides: [String: String?]) -> [String: String] {
        var result = environment
        for (key, value) in overrides { result[key] = value }
        return result
    }

    /// Starts a client of the session in the background; it is stopped (with its process group) at
    /// tear-down if still running.
    public func startClient(_ executable: String, arguments: [String] = [], environment overrides: [String: String?] = [:],
                            workingDirectory: String? = nil) throws -> BackgroundProcess {
        let process = try BackgroundProcess(executable, arguments: arguments, environment: environment(with: overrides),
                                            workingDirectory: workingDirectory ?? homeDirectory.path)
        clients.withLock { $0.append(process) }
        logger.debug("GNOME session: client started", metadata: ["executable": "\(executable)", "arguments": "\(arguments)", "pid": "\(process.pid)"])
        return process
    }

    /// Runs a client of the session to completion.
    public func run(_ executable: String, arguments: [String] = [], environment overrides: [String: String?] = [:],
                    timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        try await ProcessRunner.run(executable, arguments: arguments, environment: environment(with: overrides),
                                    workingDirectory: homeDirectory.path, timeout: timeout)
    }

    /// Stops a client started with ``startClient(_:arguments:environment:workingDirectory:)`` and its process group.
    public func stopClient(_ process: BackgroundProcess) async {
        await RigDaemon.terminateGroup(of: process)
    }

    /// `gdbus ARGUMENTS` on this session's buses.
    public func gdbus(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> ProcessResult {
        try await run("gdbus", arguments: arguments, timeout: timeout)
    }

    /// Shows or hides GNOME Shell's overview (`org.gnome.Shell`'s `OverviewActive`, which any client may set).
    public func setOverviewActive(_ active: Bool) async throws {
        let result = try await gdbus(["call", "--session", "--dest", "org.gnome.Shell", "--object-path", "/org/gnome/Shell",
                                      "--method", "org.freedesktop.DBus.Properties.Set", "org.gnome.Shell", "OverviewActive",
                                      "<\(active)>"])
        guard result.succeeded else { throw HarnessError("cannot set the overview: \(result)") }
    }

    /// Whether GNOME Shell shows its overview.
    public func isOverviewActive() async throws -> Bool {
        let result = try await gdbus(["call", "--session", "--dest", "org.gnome.Shell", "--object-path", "/org/gnome/Shell",
                                      "--method", "org.freedesktop.DBus.Properties.Get", "org.gnome.Shell", "OverviewActive"])
        guard result.succeeded else { throw HarnessError("cannot read the overview's state: \(result)") }
        return result.stdout.contains("true")
    }

    /// `pactl ARGUMENTS` against pipewire-pulse.
    public func pactl(_ arguments: [String]) async throws -> ProcessResult {
        try await run("pactl", arguments: arguments, timeout: .seconds(20))
    }

    /// A null sink `main`, the default (what the computer plays; its monitor is the system sound),
    /// as the X11 tests' PulseAudio has: without hardware PipeWire would have no sink.
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
        // WirePlumber may pick its default a moment later: set it until it holds.
        while true {
            _ = try await pactl(["set-default-sink", "main"])
            let info = try await pactl(["info"])
            if info.stdout.contains("Default Sink: main") { return }
            if ContinuousClock.now >= deadline { throw HarnessError("the default sink is not `main`: \(info)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: Set-up

    /// GNOME settings for a test desktop: no banners over the picture (as root the shell posts
    /// "Logged in as a privileged user"), no animations, no welcome tour, no blanking or locking.
    private static let shellSettings: [(String, String, String)] = [
        ("org.gnome.desktop.notifications", "show-banners", "false"),
        ("org.gnome.desktop.interface", "enable-animations", "false"),
        ("org.gnome.shell", "welcome-dialog-last-shown-version", "'999'"),
        ("org.gnome.desktop.session", "idle-delay", "uint32 0"),
        ("org.gnome.desktop.screensaver", "lock-enabled", "false"),
    ]

    private static func clientEnvironment(runtime: URL, home: URL, systemSocket: String, sessionSocket: String,
                                          waylandDisplay: String, pulseConfig: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !(key.hasPrefix("XDG_") || key.hasPrefix("PULSE_") || key.hasPrefix("DBUS_") || key.hasPrefix("GNOME_")
              || key.hasPrefix("LC_") || ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET", "XAUTHORITY", "HOME", "TERM",
                                          "NO_AT_BRIDGE", "GTK_A11Y", "GDK_BACKEND", "GSETTINGS_BACKEND", "SESSION_MANAGER",
                                          "LANGUAGE", "ORK_BIN_DIR"].contains(key))
        }
        // English labels, whatever the machine's locale: tests read the portal's dialog.
        environment["LANG"] = "C.UTF-8"
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        environment["XDG_STATE_HOME"] = home.appendingPathComponent(".local/state").path
        environment["XDG_CACHE_HOME"] = home.appendingPathComponent(".cache").path
        environment["XDG_VIDEOS_DIR"] = home.appendingPathComponent("Videos").path
        environment["XDG_CURRENT_DESKTOP"] = "GNOME"
        environment["XDG_SESSION_TYPE"] = "wayland"
        environment["XDG_SESSION_DESKTOP"] = "gnome"
        environment["WAYLAND_DISPLAY"] = waylandDisplay
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(sessionSocket)"
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(systemSocket)"
        environment["PULSE_SERVER"] = "unix:\(runtime.appendingPathComponent("pulse/native").path)"
        environment["PULSE_CLIENTCONFIG"] = pulseConfig
        return environment
    }

    /// A system bus that anyone may use and that activates nothing.
    private static func systemBusConfiguration(socket: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_type="method_call"/>
            <allow send_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow receive_type="method_call"/>
            <allow receive_type="method_return"/>
            <allow receive_type="error"/>
            <allow receive_type="signal"/>
          </policy>
        </busconfig>

        """
    }
}
