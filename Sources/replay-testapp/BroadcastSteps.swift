import Foundation
import OpenReplayKit
import Synchronization

/// The test app's broadcast steps, as an iOS app's code would make them:
/// `broadcast-load[=EXTENSION]` (the picker: `RPBroadcastActivityViewController`, presented, its
/// delegate's answer), `broadcast-start`, `broadcast-pause`, `broadcast-resume`, `broadcast-finish`,
/// `broadcast-status`, `broadcast-wait-paused=SECONDS` (until `isPaused`), `broadcast-wait-info=SECONDS`
/// (until the delegate heard a URL and service info), `broadcast-wait-ended=SECONDS` (the delegate's
/// didFinishWithError), and `system-picker[=EXTENSION][,no-mic]` (`RPSystemBroadcastPickerView`).
final class BroadcastSteps: RPBroadcastActivityViewControllerDelegate, RPBroadcastControllerDelegate {
    private struct State {
        var controller: RPBroadcastController?
        var url: URL?
        var info: [String: String]?
        var ended: (any Error)??
    }
    private let state = Mutex(State())

    private var controller: RPBroadcastController {
        get throws {
            guard let controller = state.withLock({ $0.controller }) else { throw TestAppError("no broadcast controller: run broadcast-load first") }
            return controller
        }
    }

    func run(_ name: String, _ value: String?) async throws -> [String: TestApp.Value] {
        switch name {
        case "broadcast-load":
            let picker = try await RPBroadcastActivityViewController.load(withPreferredExtension: value)
            picker.delegate = self
            let controller = try await picker.presentAndWait()
            return ["extension": .string(controller.broadcastExtensionBundleID ?? ""), "service": .string(controller.serviceName)]
        case "broadcast-start":
            try await controller.startBroadcast()
        case "broadcast-pause":
            try await controller.pauseBroadcast()
        case "broadcast-resume":
            try await controller.resumeBroadcast()
        case "broadcast-finish":
            try await controller.finishBroadcast()
        case "broadcast-status":
            break
        case "broadcast-wait-paused":
            let running = try self.controller
            try await Self.wait(value, "the broadcast to pause") { running.isPaused }
        case "broadcast-wait-info":
            try await Self.wait(value, "the broadcast URL and service info") { self.state.withLock { $0.url != nil && $0.info != nil } }
            return state.withLock { state in
                ["url": .string(state.url?.absoluteString ?? ""),
                 "info": .string((state.info ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ";"))]
            }
        case "broadcast-wait-ended":
            try await Self.wait(value, "the delegate's didFinishWithError") { self.state.withLock { $0.ended != nil } }
            let error = state.withLock { $0.ended ?? nil }
            let bridged = error.map { $0 as NSError }
            return ["delegate": .bool(true), "code": .int(bridged?.code ?? 0), "description": .string(bridged?.localizedDescription ?? "")]
        case "system-picker":
            let parts = (value ?? "").split(separator: ",").map(String.init)
            let picker = RPSystemBroadcastPickerView()
            picker.preferredExtension = parts.first { $0 != "no-mic" }
            picker.showsMicrophoneButton = !parts.contains("no-mic")
            let identifier = try await picker.showPicker()
            return ["extension": .string(identifier)]
        default:
            throw TestAppError("unknown step \(name)")
        }
        let controller = try self.controller
        return ["broadcasting": .bool(controller.isBroadcasting), "paused": .bool(controller.isPaused),
                "url": .string(controller.broadcastURL?.absoluteString ?? ""), "extension": .string(controller.broadcastExtensionBundleID ?? "")]
    }

    private static func wait(_ value: String?, _ what: String, until condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(Double(value ?? "30") ?? 30)
        while !condition() {
            guard Date() < deadline else { throw TestAppError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    // MARK: delegates

    func broadcastActivityViewController(_ broadcastActivityViewController: RPBroadcastActivityViewController,
                                         didFinishWith broadcastController: RPBroadcastController?, error: (any Error)?) {
        broadcastController?.delegate = self
        state.withLock { $0.controller = broadcastController ?? $0.controller }
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didFinishWithError error: (any Error)?) {
        state.withLock { $0.ended = .some(error) }
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: String]) {
        state.withLock { $0.info = serviceInfo }
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateBroadcast broadcastURL: URL) {
        state.withLock { $0.url = broadcastURL }
    }
}
