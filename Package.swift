// swift-tools-version: 6.1
import PackageDescription

/// Every target of ours is Swift 6 with complete strict concurrency, and imports are internal unless
/// said otherwise, so that no public API can show a C type.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "OpenReplayKit",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "replayd", targets: ["replayd"]),
        .executable(name: "replay", targets: ["replay"]),
        .executable(name: "broadcast-service", targets: ["broadcast-service"]),
        .executable(name: "replay-ui", targets: ["replay-ui"]),
        .executable(name: "replay-testcontent", targets: ["replay-testcontent"]),
        .executable(name: "replay-bench", targets: ["replay-bench"]),
        // For apps: ReplayKit's names (RPScreenRecorder…) over replayd.
        .executable(name: "replay-ring", targets: ["replay-ring"]),
        .library(name: "OpenReplayKit", targets: ["OpenReplayKit"]),
        // The same for apps in C, C++, Rust, Python: libopenreplaykit.so with openreplaykit.h (`make install`).
        .library(name: "openreplaykit", type: .dynamic, targets: ["OpenReplayKitC"]),
        // The broadcast upload extensions that ship (Extensions/), found beside replayd after a build.
        .executable(name: "replay-extension-rtmp", targets: ["replay-extension-rtmp"]),
        // Its setup extension: a GTK 4 window asking the server URL and stream key (kept in its app group).
        .executable(name: "replay-extension-rtmp-setup", targets: ["replay-extension-rtmp-setup"]),
        .executable(name: "replay-extension-reference", targets: ["replay-extension-reference"]),
        // The example app: GTK 4, drawing with a tone per stroke, recording, capturing and protecting itself.
        .executable(name: "sketchpad", targets: ["sketchpad"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Already in the graph (postgres-nio, hummingbird-auth): HMAC-SHA256 for the CSRF tokens.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // MARK: C libraries, each behind one system-library target found by pkg-config.
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswscale-dev", "libswresample-dev"])]),
        .systemLibrary(name: "CXCB", pkgConfig: "xcb-shm",
                       providers: [.apt(["libxcb1-dev", "libxcb-shm0-dev", "libxcb-xfixes0-dev", "libxcb-damage0-dev", "libxcb-randr0-dev", "libxcb-composite0-dev", "libxcb-shape0-dev", "libxcb-res0-dev"])]),
        // libpulse.pc adds -pthread/-D_REENTRANT, which SwiftPM refuses with a warning: headers are in /usr/include anyway.
        .systemLibrary(name: "CPulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "CCairo", pkgConfig: "cairo-xcb", providers: [.apt(["libcairo2-dev"])]),
        .systemLibrary(name: "CYUV", providers: [.apt(["libyuv-dev"])]),
        .systemLibrary(name: "CGtk", pkgConfig: "gtk4", providers: [.apt(["libgtk-4-dev"])]),
        // The Secret Service (GNOME Keyring, KWallet) for the app groups' shared secrets.
        .systemLibrary(name: "CSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        // x264.pc adds -DX264_API_IMPORTS, a flag SwiftPM refuses with a warning (it matters on Windows only).
        .systemLibrary(name: "CX264", providers: [.apt(["libx264-dev"])]),
        // GIO's D-Bus, for the screen-cast portal (Wayland).
        .systemLibrary(name: "CGio", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // C glue Swift cannot express, one small C target per C library (macros, variadic callbacks,
        // externs of incomplete type, socket ancillary data), each with static asserts on what it assumes.
        .target(name: "CFFmpegShim", dependencies: ["CFFmpeg"], linkerSettings: [.linkedLibrary("avutil")]),
        .target(name: "CXCBShim", dependencies: ["CXCB"],
                linkerSettings: ["xcb", "xcb-shm", "xcb-xfixes", "xcb-damage", "xcb-randr"].map { LinkerSetting.linkedLibrary($0) }),
        .target(name: "CSocketShim"),
        .target(name: "CGtkShim", dependencies: ["CGtk"], linkerSettings: [.linkedLibrary("X11")]),
        // Wayland capture: a PipeWire video stream (SPA pods are macros) and the screen-cast portal's
        // D-Bus calls, each behind a small C API of plain types. libpipewire-0.3.pc adds -D_REENTRANT,
        // which SwiftPM refuses with a warning: its two include folders as Debian installs them instead.
        .target(name: "CPipeWire",
                cSettings: [.unsafeFlags(["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2"])],
                linkerSettings: [.linkedLibrary("pipewire-0.3")]),
        .target(name: "CPortal", dependencies: ["CGio"]),

        // MARK: Our modules, layered: pure values at the bottom, C-backed implementations above.
        // One FFmpeg core for the recorder and the service: errors, log routing, the libavformat output.
        .target(name: "ReplayFFmpeg",
                dependencies: ["CFFmpeg", "CFFmpegShim", .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        // The one bridge from blocking C work to async callers, below media and IPC alike.
        .target(name: "ReplaySystem", swiftSettings: swiftSettings),
        .target(name: "ReplayMedia",
                dependencies: ["CFFmpeg", "CX264", "CYUV", "ReplayFFmpeg", "ReplaySystem", .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "ReplayCapture",
                dependencies: ["ReplayMedia", "CXCB", "CPulse", "CCairo", "CYUV", "CXCBShim", "CPipeWire", "CPortal",
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        // The recording engine: capture → convert → encode → destinations, independent of the daemon.
        .target(name: "ReplayEngine",
                dependencies: ["ReplayMedia", "ReplayCapture", "ReplayFFmpeg", "ReplayIPC", "ReplaySystem", "CYUV",
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "ReplayIPC",
                dependencies: ["CSocketShim", "ReplaySystem",
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "ReplayDaemon",
                dependencies: ["ReplayEngine", "ReplayMedia", "ReplayCapture", "ReplayIPC", "ReplaySystem",
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .executableTarget(name: "replayd",
                          dependencies: ["ReplayDaemon", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),
        // The system windows (consent prompt, preview) replayd starts: GTK 4 through a small Swift layer.
        .target(name: "ReplayGtk", dependencies: ["CGtk", "CGtkShim"], swiftSettings: swiftSettings),
        .executableTarget(name: "replay-ui",
                          dependencies: ["ReplayGtk", "ReplayMedia", "ReplayIPC", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),
        .executableTarget(name: "replay",
                          dependencies: ["ReplayIPC", "CPortal", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),

        // MARK: The library for apps: ReplayKit's API over replayd's socket (no NIO in its public API).
        // H.264 for its VideoToolbox subset (VTCompressionSession): libx264 giving AVCC, behind plain Swift values.
        .target(name: "OpenReplayKitMedia", dependencies: ["CX264", "CYUV"], swiftSettings: swiftSettings),
        .target(name: "OpenReplayKit", dependencies: ["ReplayIPC", "OpenReplayKitMedia", "CXCB", "CSecret"], swiftSettings: swiftSettings),
        // Its C API: the header (openreplaykit.h, the contract, in a C target of its own) and the Swift
        // functions that export it with @_cdecl over OpenReplayKit's public API.
        .target(name: "COpenReplayKit"),
        .target(name: "OpenReplayKitC", dependencies: ["COpenReplayKit", "OpenReplayKit"], swiftSettings: swiftSettings),

        // MARK: Broadcast upload extensions that ship: each a folder of Extensions/ with its
        // manifest.json and icon (installed as PREFIX/share/openreplaykit/extensions/ID.orkextension/).
        // What they share: the samples encoded with ReplayMedia and sent through libavformat (StreamPipeline).
        .target(name: "ExtensionStreaming",
                dependencies: ["OpenReplayKit", "ReplayMedia", "CYUV", .product(name: "Logging", package: "swift-log")],
                path: "Extensions/Streaming", swiftSettings: swiftSettings),
        .executableTarget(name: "replay-extension-rtmp",
                          dependencies: ["OpenReplayKit", "ExtensionStreaming", .product(name: "Logging", package: "swift-log")],
                          path: "Extensions/RTMP", exclude: ["manifest.json", "icon.png"],
                          swiftSettings: swiftSettings),
        .executableTarget(name: "replay-extension-rtmp-setup",
                          dependencies: ["OpenReplayKit", "ReplayGtk"],
                          path: "Extensions/RTMPSetup", exclude: ["manifest.json", "icon.png"],
                          swiftSettings: swiftSettings),
        // The reference service's extension: signs in, creates the broadcast, publishes, passes viewers' feedback back.
        .executableTarget(name: "replay-extension-reference",
                          dependencies: ["OpenReplayKit", "ExtensionStreaming",
                                         .product(name: "Crypto", package: "swift-crypto"),
                                         .product(name: "NIOCore", package: "swift-nio"),
                                         .product(name: "NIOPosix", package: "swift-nio"),
                                         .product(name: "NIOHTTP1", package: "swift-nio"),
                                         .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Extensions/Reference", exclude: ["manifest.json", "icon.png"],
                          swiftSettings: swiftSettings),

        // MARK: Examples: apps written against OpenReplayKit as an app developer would.
        .executableTarget(name: "sketchpad",
                          dependencies: ["OpenReplayKit", "ReplayGtk", "CPulse", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Examples/SketchPad", swiftSettings: swiftSettings),

        // MARK: The reference broadcast service, layered: the RTMP protocol (codecs, the server's
        // connection state machine, a publishing client), media (FFmpeg muxing, the ingest), storage,
        // the web app, and a thin composition that runs them in one service group.
        .target(name: "RTMP",
                dependencies: [.product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "BroadcastMedia",
                dependencies: ["RTMP", "CFFmpeg", "ReplayFFmpeg",
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "BroadcastStore",
                dependencies: [.product(name: "GRDB", package: "GRDB.swift"),
                               .product(name: "PostgresNIO", package: "postgres-nio"),
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "BroadcastWeb",
                dependencies: ["BroadcastMedia", "BroadcastStore",
                               .product(name: "Hummingbird", package: "hummingbird"),
                               .product(name: "HummingbirdCore", package: "hummingbird"),
                               .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                               .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                               .product(name: "Crypto", package: "swift-crypto"),
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "Logging", package: "swift-log")],
                // The pages' JavaScript and style sheet, served at /static/ (StaticFiles.swift).
                resources: [.copy("Static")],
                swiftSettings: swiftSettings),
        .target(name: "BroadcastService",
                dependencies: ["BroadcastMedia", "BroadcastStore", "BroadcastWeb",
                               .product(name: "Hummingbird", package: "hummingbird"),
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .executableTarget(name: "broadcast-service",
                          dependencies: ["BroadcastService", "BroadcastStore", "BroadcastWeb", "ReplayFFmpeg", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),

        // MARK: Benchmarks (make bench)
        .executableTarget(name: "replay-bench", dependencies: ["ReplayEngine", "ReplayMedia", "CX264",
                                                               .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                                               .product(name: "Logging", package: "swift-log")],
                          path: "Benchmarks/ReplayBench", swiftSettings: swiftSettings),

        // replayd's Wayland recording beside GNOME Shell's own recorder on a headless GNOME Shell.
        .executableTarget(name: "replay-wayland-bench", dependencies: ["ReplayTesting",
                                                                        .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Benchmarks/WaylandBench", swiftSettings: swiftSettings),

        // MARK: Test support: real X content and sound, real servers.
        .executableTarget(name: "replay-testcontent",
                          dependencies: ["CXCB", "CPulse", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),
        // A test "app" that drives OpenReplayKit from its own process (SystemTests run it).
        .executableTarget(name: "replay-testapp",
                          dependencies: ["OpenReplayKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),
        // Both ends of a frame ring in a process of their own: the writer (replayd's side, with test
        // pictures and sound) for the tests, the reader (an app's side) for the benchmark.
        .executableTarget(name: "replay-ring",
                          dependencies: ["ReplayEngine", "ReplayMedia", "ReplayIPC", "OpenReplayKit", "ReplayTesting",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swiftSettings),
        // The seed's SampleHandler (WWDC 2017, "Developing Broadcast Extensions") as an upload
        // extension that writes what it receives to a file, for the broadcast system tests.
        .executableTarget(name: "replay-testextension", dependencies: ["OpenReplayKit"], swiftSettings: swiftSettings),
        // A setup extension in the way of iOS's template, told by a file what to answer (complete, cancel, leave).
        .executableTarget(name: "replay-testsetup", dependencies: ["OpenReplayKit"], swiftSettings: swiftSettings),
        .target(name: "ReplayTesting",
                dependencies: ["ReplayIPC", .product(name: "Logging", package: "swift-log"),
                               // Headless Chromium over the DevTools protocol (Chromium.swift).
                               .product(name: "HummingbirdWSClient", package: "hummingbird-websocket")],
                swiftSettings: swiftSettings),

        .testTarget(name: "ReplayMediaTests", dependencies: ["ReplayMedia", "ReplayTesting", "CYUV"], swiftSettings: swiftSettings),
        .testTarget(name: "ReplayCaptureTests", dependencies: ["ReplayCapture"], swiftSettings: swiftSettings),
        .testTarget(name: "ReplayEngineTests", dependencies: ["ReplayEngine", "ReplayCapture", "ReplayMedia", "ReplayIPC", "ReplayTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "ReplayIPCTests", dependencies: ["ReplayIPC", "ReplayTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "ReplayDaemonTests", dependencies: ["ReplayDaemon", "ReplayIPC", "ReplaySystem", "ReplayTesting",
                                                              .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
                    swiftSettings: swiftSettings),
        .testTarget(name: "SystemWindowsTests", dependencies: ["ReplayTesting"], swiftSettings: swiftSettings),
        // Fixtures: iOS ReplayKit sources with only their imports changed, which IOSSourceCompileTests
        // type-check against the built OpenReplayKit module in Swift 5 and 6 language modes.
        .testTarget(name: "OpenReplayKitTests", dependencies: ["OpenReplayKit", "ExtensionStreaming", "ReplayIPC", "ReplayTesting"],
                    exclude: ["Fixtures"], swiftSettings: swiftSettings),
        // CAPI: the C program and the Python script that CAPITests compile and run against libopenreplaykit.so.
        .testTarget(name: "SystemTests", dependencies: ["ReplayTesting"], exclude: ["CAPI"], swiftSettings: swiftSettings),
        // A headless GNOME Shell with its portal (ReplayTesting's GnomeSession); Support: the Python helpers the
        // tests run (the portal's dialog answered through AT-SPI, a native Wayland colour window, a tone).
        .testTarget(name: "WaylandTests", dependencies: ["ReplayTesting"], exclude: ["Support"], swiftSettings: swiftSettings),
        .testTarget(name: "BroadcastServiceTests",
                    dependencies: ["BroadcastService", "BroadcastWeb", "BroadcastStore", "BroadcastMedia", "RTMP", "ReplayFFmpeg", "ReplayTesting",
                                   .product(name: "HummingbirdWSClient", package: "hummingbird-websocket")],
                    exclude: ["Fixtures"], swiftSettings: swiftSettings),
    ]
)
