import ArgumentParser
import Logging
import ReplayDaemon
import ReplayIPC
import ServiceLifecycle
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// replayd: the per-user daemon that owns screen capture and recording sessions.
@main
struct Replayd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replayd",
        abstract: "The OpenReplayKit daemon: owns screen capture and recordings for one user.",
        discussion: """
            You rarely start it yourself: `replay` starts it on demand, and a systemd user unit \
            is shipped (dist/systemd/replayd.service). It listens on \
            $XDG_RUNTIME_DIR/openreplaykit/replayd.sock (or /tmp/openreplaykit-UID/replayd.sock), \
            serves only its own user, logs to stderr, and leaves by itself after --idle-exit \
            seconds with nothing to do. SIGTERM or SIGINT stop a running recording, finish its \
            file, and exit.

            Examples:
              replayd                      # run in the foreground, log to the terminal
              replayd --idle-exit 0        # never leave by itself (as the systemd unit runs it)
              replayd --log-level debug
              REPLAYD_IDLE_EXIT=5 replay record --duration 2   # the replayd started on demand leaves 5 s after
            """)

    @Option(name: .customLong("idle-exit"), help: ArgumentHelp("Leave after this many seconds with no recording and no client (0: never). Default: $REPLAYD_IDLE_EXIT, else 60.", valueName: "seconds"))
    var idleExitOption: Int?

    /// A replayd started on demand by `replay` inherits its environment: REPLAYD_IDLE_EXIT sets
    /// its idle exit (tests use it so that no daemon outlives them for long).
    var idleExit: Int {
        idleExitOption ?? ProcessInfo.processInfo.environment["REPLAYD_IDLE_EXIT"].flatMap { Int($0) } ?? 60
    }

    #if DEBUG
    // Debug builds only (the tests'): a release replayd always asks the person.
    @Option(name: .customLong("consent-answer-for-tests"),
            help: ArgumentHelp("Answer apps' consent prompts with this (allow or deny) instead of asking the person: for tests only.",
                               valueName: "answer", visibility: .hidden))
    var consentAnswerForTests: String?

    @Option(name: .customLong("picker-answer-for-tests"),
            help: ArgumentHelp("Answer the broadcast picker with this (cancel, ID or ID,microphone) instead of asking the person: for tests only.",
                               valueName: "answer", visibility: .hidden))
    var pickerAnswerForTests: String?
    #endif

    /// How apps' consent is asked: the system window, or (debug builds, for tests) a fixed answer.
    private var consentPrompt: ConsentPrompt {
        #if DEBUG
        if let answer = consentAnswerForTests.flatMap(SystemWindows.ConsentAnswer.init(rawValue:)) { return .fixed(answer) }
        #endif
        return .systemWindow
    }

    /// How the broadcast service is chosen when none is named: the picker, or (debug builds, for tests) a fixed choice.
    private var servicePicker: ServicePicker {
        #if DEBUG
        if let picker = pickerAnswerForTests.flatMap(ServicePicker.init(testAnswer:)) { return picker }
        #endif
        return .systemWindow
    }
    @Option(name: .customLong("extension-memory-mb"),
            help: ArgumentHelp("The memory a broadcast upload extension may use, in MB (its own dirtied pages, Private_Dirty; iOS gives 50); over it, its broadcast ends with an error saying so.", valueName: "MB"))
    var extensionMemoryMegabytes = BroadcastHostLimits.defaultMemoryMegabytes

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: String = "info"

    @Option(name: .customLong("ready-fd"),
            help: ArgumentHelp("Write \"listening\" to this inherited descriptor once the socket answers, then close it (how `replay` knows the replayd it started is ready).",
                               valueName: "fd"))
    var readyDescriptor: Int32?

    func validate() throws {
        guard idleExit >= 0 else { throw ValidationError("--idle-exit must be 0 (never) or a number of seconds, not \(idleExit).") }
        #if DEBUG
        if let answer = consentAnswerForTests, SystemWindows.ConsentAnswer(rawValue: answer) == nil {
            throw ValidationError("--consent-answer-for-tests is allow or deny, not \"\(answer)\".")
        }
        if let answer = pickerAnswerForTests, ServicePicker(testAnswer: answer) == nil {
            throw ValidationError("--picker-answer-for-tests is cancel, ID or ID,microphone, not \"\(answer)\".")
        }
        #endif
        guard extensionMemoryMegabytes > 0 else { throw ValidationError("--extension-memory-mb must be a positive number of MB, not \(extensionMemoryMegabytes).") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level \"\(logLevel)\": use trace, debug, info, notice, warning, error or critical.")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "replayd")
        let paths = ControlPaths.forCurrentUser()
        let lock: DaemonLock
        do {
            try paths.prepareDirectory()
            lock = try DaemonLock.acquire(paths: paths)
        } catch {
            printError("replayd: \(error.message)")
            throw ExitCode(error.code == .sessionActive ? 2 : 1)
        }
        // Writing to a client that went away must be an error, not the end of replayd.
        signal(SIGPIPE, SIG_IGN)
        // Pictures (1 MiB and more) are mapped on their own: freed at a session's end, they leave replayd.
        GlibcMalloc.mapBlocks(ofAtLeast: 1 << 20)

        // Ours alone: no extension or window replayd starts may hold it open.
        if let readyDescriptor { _ = fcntl(readyDescriptor, F_SETFD, FD_CLOEXEC) }
        var configuration = ControlServer.Configuration(paths: paths, idleExit: idleExit == 0 ? nil : .seconds(idleExit), software: "replayd 0.1",
                                                        consentPrompt: consentPrompt, servicePicker: servicePicker,
                                                        extensionMemoryMegabytes: extensionMemoryMegabytes)
        configuration.readyDescriptor = readyDescriptor
        let server = ControlServer(configuration: configuration, logger: logger)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            cancellationSignals: [],
            logger: logger))
        do {
            try await group.run()
        } catch let error as ReplayError {
            printError("replayd: \(error.message)")
            throw ExitCode(1)
        }
        withExtendedLifetime(lock) {}
    }
}

private func printError(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
