public import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium started for one test, with a fresh profile, driven over the DevTools protocol
/// (the broadcast service's page tests and the system broadcast tests watch the viewer page with it).
public final class Chromium: Sendable {
    let process: BackgroundProcess
    public let profile: URL
    /// Its `TMPDIR`, apart from the profile: the singleton socket made there must stay under the
    /// 108 bytes of a socket's path.
    let temporary: URL
    public let port: Int

    /// - Parameter extraArguments: more command-line switches (e.g. `--host-resolver-rules` for made-up host names).
    public init(directory: URL, extraArguments: [String] = []) throws {
        profile = directory.appendingPathComponent("chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        // Its temporary files (the singleton socket's directory, which it leaves behind even on
        // SIGTERM) go in a directory of their own, removed with the profile.
        temporary = try makeTemporaryDirectory(prefix: "ork-chromium")
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = temporary.path
        do {
            process = try BackgroundProcess("/usr/bin/chromium", arguments: [
                "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--user-data-dir=\(profile.path)",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--remote-allow-origins=*",
                "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-gpu", "--mute-audio"]
                + extraArguments + ["about:blank"], environment: environment)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
        // Chromium writes the port it chose into DevToolsActivePort.
        let file = profile.appendingPathComponent("DevToolsActivePort")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = try? String(contentsOf: file, encoding: .utf8), let first = text.split(separator: "\n").first, let p = Int(first) {
                port = p
                return
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        port = 0
        stop()
        throw HarnessError("Chromium did not start its DevTools endpoint")
    }

    /// SIGTERM, SIGKILL after 5 s; the profile is removed.
    public func stop() {
        if process.isRunning {
            process.signal(SIGTERM)
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { process.signal(SIGKILL) }
            while process.isRunning { Thread.sleep(forTimeInterval: 0.02) }
        }
        // Its helpers (renderer, GPU, zygote) are in its process group.
        kill(-process.pid, SIGKILL)
        try? FileManager.default.removeItem(at: profile)
        try? FileManager.default.removeItem(at: temporary)
    }

    /// Opens a new tab and runs `body` with a DevTools session on it.
    public func withPage<T: Sendable>(_ body: @escaping @Sendable (ChromiumPage) async throws -> T) async throws -> T {
        let result = try await ProcessRunner.run("/usr/bin/curl", arguments: ["-s", "-X", "PUT", "http://127.0.0.1:\(port)/json/new?about:blank"],
                                                 timeout: .seconds(30))
        guard let target = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let url = target["webSocketDebuggerUrl"] as? String else { throw HarnessError("no DevTools target: \(result.stdout)") }
        let box = Mutex<Result<T, any Error>?>(nil)
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 64 << 20), logger: Logger(label: "test.cdp")) { inbound, outbound, _ in
            let page = ChromiumPage(outbound: outbound)
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        for try await message in inbound.messages(maxSize: 64 << 20) {
                            if case .text(let text) = message { page.receive(text) }
                        }
                    } catch {}
                    page.failAll()
                }
                let outcome: Result<T, any Error>
                do { outcome = .success(try await body(page)) } catch { outcome = .failure(error) }
                box.withLock { $0 = outcome }
                group.cancelAll()
            }
        }
        guard let outcome = box.withLock({ $0 }) else { throw HarnessError("DevTools session ended early") }
        return try outcome.get()
    }
}

/// One tab's DevTools session: commands with ids, answers matched by id.
public final class ChromiumPage: Sendable {
    private let outbound: WebSocketOutboundWriter
    private let state = Mutex<(next: Int, waiting: [Int: CheckedContinuation<Data, any Error>])>((1, [:]))

    init(outbound: WebSocketOutboundWriter) { self.outbound = outbound }

    func receive(_ text: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], let id = object["id"] as? Int else { return }
        let continuation = state.withLock { $0.waiting.removeValue(forKey: id) }
        if let error = object["error"] {
            continuation?.resume(throwing: HarnessError("DevTools error: \(error)"))
        } else {
            let result = (try? JSONSerialization.data(withJSONObject: object["result"] ?? [:])) ?? Data("{}".utf8)
            continuation?.resume(returning: result)
        }
    }

    func failAll() {
        let waiting = state.withLock { s in
            let w = s.waiting
            s.waiting.removeAll()
            return w
        }
        for c in waiting.values { c.resume(throwing: HarnessError("DevTools connection closed")) }
    }

    /// Sends a command; returns its `result` as JSON.
    public func send(_ method: String, _ parametersJSON: String = "{}") async throws -> Data {
        try await withCheckedThrowingContinuation { continuation in
            let id = state.withLock { s in
                let id = s.next
                s.next += 1
                s.waiting[id] = continuation
                return id
            }
            let message = "{\"id\":\(id),\"method\":\"\(method)\",\"params\":\(parametersJSON)}"
            let outbound = outbound
            Task {
                do { try await outbound.write(.text(message)) } catch {
                    self.state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: error)
                }
            }
            // A page that stops answering (a script that never yields) fails the test instead of hanging it.
            Task {
                try? await Task.sleep(for: .seconds(30))
                self.state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: HarnessError("DevTools \(method) got no answer in 30 s"))
            }
        }
    }

    /// Evaluates JavaScript (promises awaited) and returns its value as JSON text. `userGesture`: as if
    /// the user had clicked (what `requestFullscreen` needs).
    public func evaluate(_ expression: String, userGesture: Bool = false) async throws -> String {
        let parameters = try JSONSerialization.data(withJSONObject: ["expression": expression, "returnByValue": true, "awaitPromise": true,
                                                                     "userGesture": userGesture])
        let data = try await send("Runtime.evaluate", String(decoding: parameters, as: UTF8.self))
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return "null" }
        if let exception = object["exceptionDetails"] { throw HarnessError("JavaScript exception: \(exception)") }
        guard let result = object["result"] as? [String: Any], let value = result["value"] else { return "null" }
        let wrapped = try JSONSerialization.data(withJSONObject: [value])
        return String(String(decoding: wrapped, as: UTF8.self).dropFirst().dropLast())
    }

    public func navigate(_ url: String) async throws {
        _ = try await send("Page.navigate", "{\"url\":\"\(url)\"}")
        try await waitFor("document.readyState === 'complete' && location.href.startsWith(\(Self.quote(url.components(separatedBy: "?")[0])))")
    }

    /// The page's viewport, in CSS pixels (a 1:1 device).
    public func setViewport(width: Int, height: Int) async throws {
        _ = try await send("Emulation.setDeviceMetricsOverride", "{\"width\":\(width),\"height\":\(height),\"deviceScaleFactor\":1,\"mobile\":false}")
    }

    /// Saves a PNG of what the page shows now.
    public func screenshot(to file: URL) async throws {
        let data = try await send("Page.captureScreenshot", "{\"format\":\"png\"}")
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any], let base64 = object["data"] as? String,
              let png = Data(base64Encoded: base64) else { throw HarnessError("no screenshot") }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try png.write(to: file)
    }

    /// Polls `condition` (JavaScript) until it is true.
    public func waitFor(_ condition: String, timeout: Double = 15) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? await evaluate("!!(\(condition))")) == "true" { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError("timed out waiting for \(condition)")
    }

    public static func quote(_ text: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [text])
        return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
    }
}
