import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import Synchronization

/// Messages one WebSocket client received.
final class WebSocketCollector: Sendable {
    private let state = Mutex<(texts: [String], binary: [ByteBuffer])>(([], []))

    var texts: [String] { state.withLock { $0.texts } }
    var binaryMessages: [ByteBuffer] { state.withLock { $0.binary } }
    var binaryBytes: [UInt8] { state.withLock { $0.binary.flatMap { Array($0.readableBytesView) } } }

    /// Waits until `condition` holds (polling), at most `timeout` seconds.
    func wait(timeout: Double = 10, for condition: (WebSocketCollector) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while !condition(self), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
    }

    /// The viewer counts announced so far.
    var viewerCounts: [Int] { events.compactMap { $0["type"] as? String == "viewers" ? $0["viewerCount"] as? Int : nil } }

    /// Events (text messages) decoded as JSON objects.
    var events: [[String: Any]] {
        texts.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    func add(_ message: WebSocketMessage) {
        state.withLock { s in
            switch message {
            case .text(let text): s.texts.append(text)
            case .binary(let buffer): s.binary.append(buffer)
            }
        }
    }

    /// Connects to `url` and records messages for `seconds`, or until `until` says the collection is enough.
    static func collect(url: String, seconds: Double, headers: [String: String] = [:], into collector: WebSocketCollector = WebSocketCollector(),
                        until: @escaping @Sendable (WebSocketCollector) -> Bool = { _ in false }) async throws -> WebSocketCollector {
        var fields = HTTPFields()
        for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 8 << 20, additionalHeaders: fields),
                                          logger: Logger(label: "test.ws")) { inbound, _, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: 8 << 20) {
                        collector.add(message)
                        if until(collector) { return }
                    }
                }
                group.addTask { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
                _ = try await group.next()
                group.cancelAll()
            }
        }
        return collector
    }
}
