import ArgumentParser
import BroadcastService
import BroadcastStore
import BroadcastWeb
import Foundation
import Logging
import ReplayFFmpeg

/// `broadcast-service`: the reference broadcast service, and its administration.
@main
struct BroadcastServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast-service",
        abstract: "The OpenReplayKit reference broadcast service: RTMP ingest, live directory, viewers, chat and likes.",
        subcommands: [Serve.self, UserCommand.self, KeyCommand.self, AppCommand.self],
        defaultSubcommand: Serve.self)
}

struct DatabaseOption: ParsableArguments {
    @Option(help: "SQLite file path (default: $XDG_DATA_HOME/openreplaykit/service/service.sqlite) or postgres://… URL.")
    var database: String?

    var location: DatabaseLocation { DatabaseLocation(argument: database) }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the web app and the RTMP ingest (the default).")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "HTTP port.") var port = 8080
    @Option(name: .customLong("rtmp-port"), help: "RTMP ingest port.") var rtmpPort = 1935
    @OptionGroup var database: DatabaseOption
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(name: .customLong("bcrypt-cost"), help: "bcrypt cost of password hashes (10–16).") var bcryptCost: UInt8 = 12
    @Option(name: .customLong("fragment-ms"),
            help: "Milliseconds of media per fMP4 fragment sent to viewers once a broadcast has more than --frame-fragments-up-to viewers (lower: less latency, more messages).")
    var fragmentMilliseconds: Int64 = 100
    @Option(name: .customLong("frame-fragments-up-to"),
            help: "While a broadcast has at most this many viewers, each video frame is sent as a fragment of its own (about 30 ms less latency, three times the messages); 0: always --fragment-ms.")
    var frameFragmentViewers = 100
    @Option(name: .customLong("rtmp-setup-timeout"), help: "Seconds an RTMP client has to start publishing after connecting.")
    var rtmpSetupTimeout = 10
    @Option(name: .customLong("rtmp-idle-timeout"), help: "Seconds of silence after which an RTMP connection is closed.")
    var rtmpIdleTimeout = 15
    @Option(help: "Re-publish every broadcast to this RTMP URL ({id} and {user} are replaced), e.g. rtmp://cdn.example/live/{id}.")
    var relay: String?
    @Flag(name: .customLong("behind-https"),
          help: "Served through an HTTPS reverse proxy: __Host- Secure cookies, https/wss URLs, client addresses from X-Forwarded-For.")
    var behindHTTPS = false
    @Option(name: .customLong("http-header-timeout"), help: "Seconds a client has to send a whole request head (then 408).")
    var httpHeaderTimeout = 10
    @Option(name: .customLong("http-idle-timeout"), help: "Seconds an HTTP connection may stay silent between requests or in a body.")
    var httpIdleTimeout = 30
    @Option(name: .customLong("max-request-body"), help: "Largest request body in bytes (then 413).")
    var maximumRequestBody = 1 << 20
    @Option(name: .customLong("max-connections-per-address"),
            help: "Open HTTP connections per client address (then 503); 0 for no limit. Behind a proxy, its address counts.")
    var maximumConnectionsPerAddress = 64
    @Option(name: .customLong("signing-key-file"),
            help: "A file of keys shared by every node (one a line, 32+ characters, e.g. `openssl rand -hex 32`): the first signs CSRF tokens, all verify. Without it, a random key of this process.")
    var signingKeyFile: String?

    func validate() throws {
        guard (0...65535).contains(port), (0...65535).contains(rtmpPort) else { throw ValidationError("Ports are 0–65535.") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("Unknown log level \(logLevel).") }
        guard (4...31).contains(bcryptCost) else { throw ValidationError("--bcrypt-cost is 4–31.") }
        guard (20...5000).contains(fragmentMilliseconds) else { throw ValidationError("--fragment-ms is 20–5000.") }
        guard frameFragmentViewers >= 0 else { throw ValidationError("--frame-fragments-up-to is 0 (never) or more viewers.") }
        if let relay, !(relay.hasPrefix("rtmp://") || relay.hasPrefix("rtmps://")) { throw ValidationError("--relay takes an rtmp:// or rtmps:// URL.") }
        guard rtmpSetupTimeout > 0, rtmpIdleTimeout > 0 else { throw ValidationError("RTMP timeouts are at least 1 second.") }
        guard httpHeaderTimeout > 0, httpIdleTimeout > 0 else { throw ValidationError("HTTP timeouts are at least 1 second.") }
        guard maximumRequestBody >= 16 << 10 else { throw ValidationError("--max-request-body is at least 16384.") }
        guard maximumConnectionsPerAddress >= 0 else { throw ValidationError("--max-connections-per-address is 0 (no limit) or more.") }
        _ = try signingKeys()
    }

    /// `--signing-key-file`'s keys; none without the option.
    func signingKeys() throws -> [[UInt8]] {
        guard let signingKeyFile else { return [] }
        guard let data = FileManager.default.contents(atPath: signingKeyFile) else {
            throw ValidationError("Cannot read --signing-key-file \(signingKeyFile).")
        }
        do { return try SigningKeyFile.parse(String(decoding: data, as: UTF8.self)) } catch {
            throw ValidationError("--signing-key-file \(signingKeyFile): \(error)")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = SanitizingLogHandler(wrapping: StreamLogHandler.standardError(label: label))
            handler.logLevel = level
            return handler
        }
        FFmpegLog.route(to: Logger(label: "openreplaykit.service.ffmpeg"))
        let logger = Logger(label: "openreplaykit.service")
        try await BroadcastServer.run(
            configuration: .init(host: host, port: port, rtmpPort: rtmpPort, database: database.location, bcryptCost: bcryptCost,
                                 fragmentDuration: fragmentMilliseconds, frameFragmentViewers: frameFragmentViewers, rtmpSetupTimeout: .seconds(Int64(rtmpSetupTimeout)),
                                 rtmpIdleTimeout: .seconds(Int64(rtmpIdleTimeout)), relayTemplate: relay, secureCookies: behindHTTPS,
                                 httpLimits: HTTPLimits(headerTimeout: .seconds(Int64(httpHeaderTimeout)), idleTimeout: .seconds(Int64(httpIdleTimeout)),
                                                        maximumBodyBytes: maximumRequestBody,
                                                        maximumConnectionsPerAddress: maximumConnectionsPerAddress),
                                 signingKeys: try signingKeys()),
            logger: logger)
    }
}

struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "user", abstract: "Manage accounts.", subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an account; the password is read from standard input.")
        @Argument(help: "The account name (3–32 letters, digits, '-' or '_').") var name: String
        @OptionGroup var database: DatabaseOption

        func run() async throws {
            guard let password = readLine(strippingNewline: true), !password.isEmpty else {
                throw ValidationError("Give the password on standard input, e.g. `printf '%s\\n' \"$PASSWORD\" | broadcast-service user create \(name)`.")
            }
            try await ServiceAdministration.createUser(name: name, password: password, database: database.location)
            print("Created account \(name).")
        }
    }
}

struct KeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "key", abstract: "Manage stream keys.", subcommands: [Create.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a stream key for an account and print it.")
        @Argument(help: "The account name.") var name: String
        @Option(help: "A label for the key.") var label = "cli"
        @OptionGroup var database: DatabaseOption

        func run() async throws {
            print(try await ServiceAdministration.createStreamKey(userName: name, label: label, database: database.location))
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a stream key.")
        @Argument(help: "The stream key.") var key: String
        @OptionGroup var database: DatabaseOption

        func run() async throws {
            guard try await ServiceAdministration.revokeStreamKey(key, database: database.location) else {
                throw ValidationError("No active stream key like that.")
            }
            print("Revoked.")
        }
    }
}

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "app", abstract: "Manage applications.", subcommands: [Verify.self])

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify an application: its icon becomes the one shown for it everywhere.",
            discussion: "Without verification, an icon sent with a broadcast is shown only with that account's broadcasts.")
        @Argument(help: "The application id (as the extension sends it, e.g. com.example.game).") var id: String
        @Option(help: "Its icon: a PNG file of at most 256 KB.") var icon: String
        @OptionGroup var database: DatabaseOption

        func run() async throws {
            guard let png = FileManager.default.contents(atPath: icon) else { throw ValidationError("Cannot read \(icon).") }
            try await ServiceAdministration.verifyApplication(id, png: [UInt8](png), database: database.location)
            print("Verified \(id).")
        }
    }
}
