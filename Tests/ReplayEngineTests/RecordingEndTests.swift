import Testing
@testable import ReplayEngine

/// `RecordingEnd`: the last tick of a recording, however it ends.
@Suite struct RecordingEndTests {
    @Test func durationEndsOnItsLastTickAndTheRecordingATickLater() {
        let ending = RecordingEnd(durationSeconds: 10, framesPerSecond: 30)
        #expect(!ending.isLast(298, stopping: false))
        #expect(ending.isLast(299, stopping: false))
        #expect(ending.end(lastTick: 299) == 300)
    }

    @Test func aStopEndsAtTheTickItIsSeen() {
        let ending = RecordingEnd(durationSeconds: nil, framesPerSecond: 30)
        #expect(!ending.isLast(1_000_000, stopping: false))
        #expect(ending.isLast(123, stopping: true))
        #expect(ending.end(lastTick: 123) == 124)
    }

    @Test func fallingBehindNeverSkipsTheLastTick() {
        let ending = RecordingEnd(durationSeconds: 1, framesPerSecond: 30)
        #expect(ending.skip(from: 20, missed: 5) == 25)
        #expect(ending.skip(from: 27, missed: 5) == 29)
        #expect(RecordingEnd(durationSeconds: nil, framesPerSecond: 30).skip(from: 27, missed: 5) == 32)
    }

    @Test func aTinyDurationStillHasOnePicture() {
        let ending = RecordingEnd(durationSeconds: 0.001, framesPerSecond: 30)
        #expect(ending.frameLimit == 1)
        #expect(ending.isLast(0, stopping: false))
    }
}
