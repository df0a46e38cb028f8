package import ReplayIPC

/// The person's answers to the consent prompt, per app, each remembered for `memory` (8 minutes,
/// as ReplayKit does), then asked again. An app is its executable (`/proc/PID/exe`) and, for an
/// interpreter, its script (`AppIdentity.consentKey`): a second process of the same program shares
/// the answer; another program does not.
///
/// A pure value: the time is passed in, so that tests move the clock on.
package struct ConsentStore: Sendable {
    package struct Entry: Sendable, Equatable {
        package var name: String
        package var answer: SystemWindows.ConsentAnswer
        package var decidedAt: ContinuousClock.Instant
    }

    /// How long an answer holds.
    package static let memory: Duration = .seconds(8 * 60)

    package private(set) var entries: [String: Entry] = [:]

    package init() {}

    /// The answer still held for `executable` at `now`, or nil: ask.
    package mutating func answer(for executable: String, now: ContinuousClock.Instant) -> SystemWindows.ConsentAnswer? {
        guard let entry = entries[executable] else { return nil }
        guard now - entry.decidedAt < Self.memory else {
            entries[executable] = nil
            return nil
        }
        return entry.answer
    }

    package mutating func record(_ answer: SystemWindows.ConsentAnswer, for executable: String, name: String, now: ContinuousClock.Instant) {
        entries[executable] = Entry(name: name, answer: answer, decidedAt: now)
    }

    /// The answers held at `now`, by executable.
    package mutating func list(now: ContinuousClock.Instant) -> [ConsentEntry] {
        entries = entries.filter { now - $0.value.decidedAt < Self.memory }
        return entries.sorted { $0.key < $1.key }.map { executable, entry in
            let remaining = Self.memory - (now - entry.decidedAt)
            return ConsentEntry(executable: executable, name: entry.name, answer: entry.answer.rawValue,
                                remainingSeconds: Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18)
        }
    }

    /// Forgets the answers for `app` (an executable's path, its base name, or the name the prompt
    /// showed), or every answer when nil. Returns what was forgotten.
    package mutating func reset(_ app: String?, now: ContinuousClock.Instant) -> [ConsentEntry] {
        let held = list(now: now)
        let removed = held.filter { entry in
            guard let app else { return true }
            return entry.executable == app || entry.executable.split(separator: "/").last.map(String.init) == app || entry.name == app
        }
        for entry in removed { entries[entry.executable] = nil }
        return removed
    }
}

/// How replayd asks for consent.
package enum ConsentPrompt: Sendable, Equatable {
    /// The system window (`replay-ui consent`), on the app's display.
    case systemWindow
    /// Always this answer, without a window: for tests of replayd only (in-process, or a debug
    /// build's `replayd --consent-answer-for-tests`; a release build has no such option).
    case fixed(SystemWindows.ConsentAnswer)
}

