import Foundation
import ReplayTesting
import Testing

/// Every system test, one at a time: each starts its own X server, sound server and replayd, and
/// they share two cores, so running them side by side would only measure the contention.
@Suite(.serialized)
struct SystemTests {}

/// A screenshot that is not one of the content's white flashes.
func screenshotWithoutFlash(_ environment: TestEnvironment) async throws -> RGBImage {
    for _ in 0..<10 {
        let shot = try await environment.xvfb.screenshot()
        if !TestPattern.isFlash(shot) { return shot }
        try await Task.sleep(for: .milliseconds(70))
    }
    throw HarnessError("every screenshot was a flash")
}

/// The mismatches between the colour bars expected and what `image` shows at each bar's centre.
func barMismatches(in image: RGBImage, tolerance: Int) -> [String] {
    let pattern = TestPattern(width: image.width, height: image.height)
    return (0..<8).compactMap { index in
        let (x, y) = pattern.barCentre(index)
        let seen = image.pixel(x: x, y: y)
        let expected = TestPattern.barColours[index]
        return seen.isClose(to: expected, tolerance: tolerance) ? nil
            : "\(TestPattern.barNames[index]) bar at (\(x), \(y)): expected \(expected), saw \(seen)"
    }
}

/// Finds `key` in a JSON object, at the top or nested in objects (the CLI may wrap the status).
func jsonValue(_ key: String, in object: Any) -> Any? {
    if let dictionary = object as? [String: Any] {
        if let value = dictionary[key] { return value }
        for value in dictionary.values { if let found = jsonValue(key, in: value) { return found } }
    } else if let array = object as? [Any] {
        for value in array { if let found = jsonValue(key, in: value) { return found } }
    }
    return nil
}

/// `replay status --json`, parsed; nil when it fails or is not JSON.
func statusJSON(_ environment: TestEnvironment) async throws -> (result: ProcessResult, json: Any?) {
    let result = try await environment.replay(["status", "--json"], timeout: .seconds(20))
    let json = try? JSONSerialization.jsonObject(with: result.standardOutput, options: [.fragmentsAllowed])
    return (result, json)
}

/// The running recording's own clock (`replay status --json`'s elapsed time), in seconds.
func recordingElapsed(_ environment: TestEnvironment) async throws -> Double {
    let (result, json) = try await statusJSON(environment)
    return try #require(json.flatMap { jsonValue("elapsedSeconds", in: $0) as? Double }, "the status has the elapsed time: \(result)")
}

/// Polls `replay status --json` until it reports a running session; returns the JSON.
func waitUntilRecording(_ environment: TestEnvironment, timeout: Duration = .seconds(15),
                        background: BackgroundProcess? = nil) async throws -> Any {
    let deadline = ContinuousClock.now + timeout
    var last = ""
    while ContinuousClock.now < deadline {
        if let background, let result = background.result {
            throw HarnessError("`replay record` ended before a session was running: \(result)")
        }
        let (result, json) = try await statusJSON(environment)
        last = result.description
        if let json, (jsonValue("state", in: json) as? String) == "running" { return json }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw HarnessError("no running session within \(timeout); last status: \(last)")
}

extension ProcessResult {
    /// What a person would read: standard error, else standard output.
    var message: String { stderr.isEmpty ? stdout : stderr }
}

/// What in-app capture's NV12 pictures read as: full range, BT.601 (ReplayKit's '420f'), as Y, Cb, Cr.
enum FullRangeLevels {
    /// Black: Y 0, chroma 128 (video range would be Y 16).
    static let black = [0, 128, 128]
    /// Pure green (0, 255, 0): Y = 0.587 × 255 = 149.7, Cb = 128 − 0.3313 × 255 = 43.5, Cr = 128 − 0.4187 × 255 = 21.2
    /// (video range would be 144, 54, 34).
    static let green = [150, 44, 21]

    /// Whether `measured` (Y, Cb, Cr) is each of `expected` within `tolerance` (4: black is Y ≤ 4, chroma 128 ± 4).
    static func isClose(_ measured: [Int], to expected: [Int], tolerance: Int = 4) -> Bool {
        measured.count == 3 && zip(measured, expected).allSatisfy { abs($0 - $1) <= tolerance }
    }
}
