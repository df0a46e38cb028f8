import Testing
@testable import ReplayMedia

@Suite struct AudioMixerTests {
    private func stereo(_ value: Float, count: Int) -> [Float] { Array(repeating: value, count: count * 2) }

    @Test func cutsBlocksOnceEverySourceHasReachedThem() {
        var mixer = AudioMixer(sourceCount: 2, blockSize: 4, maximumWait: 100)
        mixer.append(source: 0, position: 0, samples: stereo(0.5, count: 6))
        #expect(mixer.nextBlock(now: 4) == nil, "the second source has not delivered yet")
        mixer.append(source: 1, position: 0, samples: stereo(0.25, count: 4))
        let block = mixer.nextBlock(now: 4)
        #expect(block?.position == 0)
        #expect(block?.sources[0] == stereo(0.5, count: 4))
        #expect(block?.sources[1] == stereo(0.25, count: 4))
        #expect(mixer.nextBlock(now: 8) == nil)
        #expect(mixer.counters == AudioMixer.Counters())
    }

    @Test func waitsForALateSourceThenFillsSilenceAndCountsIt() {
        var mixer = AudioMixer(sourceCount: 2, blockSize: 4, maximumWait: 10)
        mixer.append(source: 0, position: 0, samples: stereo(1, count: 4))
        #expect(mixer.nextBlock(now: 13) == nil)
        let block = mixer.nextBlock(now: 14)
        #expect(block?.sources[1] == stereo(0, count: 4))
        #expect(mixer.counters.silenceFilled == 4)
        // When the late samples finally come, they are discarded, counted.
        mixer.append(source: 1, position: 0, samples: stereo(1, count: 4))
        #expect(mixer.counters.discarded == 4)
    }

    /// A live stream's mixer (`firstDataWait` below `maximumWait`): a source that never sent (a
    /// microphone that is off) holds the others back only `firstDataWait`; once it sends, it is
    /// waited for as long as any, and one that sent but lags is waited for `maximumWait`.
    @Test func aSourceThatNeverSentHoldsTheOthersOnlyItsShortWait() {
        var mixer = AudioMixer(sourceCount: 2, blockSize: 4, maximumWait: 100, firstDataWait: 2)
        mixer.append(source: 0, position: 0, samples: stereo(1, count: 12))
        #expect(mixer.nextBlock(now: 5) == nil)
        #expect(mixer.nextBlock(now: 6)?.sources[0] == stereo(1, count: 4), "cut at the block's end + 2, not + 100")
        mixer.append(source: 1, position: 4, samples: stereo(0.5, count: 4))
        #expect(mixer.nextBlock(now: 10)?.sources[1] == stereo(0.5, count: 4))
        // Source 1 has sent now: it is waited for up to maximumWait, as in a recording.
        #expect(mixer.nextBlock(now: 50) == nil)
        #expect(mixer.nextBlock(now: 112)?.sources[1] == stereo(0, count: 4))
        // With no source sent at all, silence goes out after the short wait.
        var silent = AudioMixer(sourceCount: 2, blockSize: 4, maximumWait: 100, firstDataWait: 2)
        #expect(silent.nextBlock(now: 5) == nil)
        #expect(silent.nextBlock(now: 6)?.sources == [stereo(0, count: 4), stereo(0, count: 4)])
    }

    /// Under load a source's first samples may come after the short wait cut past them: they are
    /// discarded (counted), and the source counts as started from then on, so that its next samples
    /// are waited for instead of being cut past, and discarded, for good.
    /// A source not waited for (the unprotected mix while nothing protected plays: its gain is 0): the
    /// block is cut as soon as the others reach its end; what it lacks there, and what it sends for
    /// the block later, is counted as not waited for, never as silence filled or as loss. Waited
    /// for again, it is waited for as any.
    @Test func aSourceNotWaitedForIsCutWithoutItAndCountedApart() {
        var mixer = AudioMixer(sourceCount: 2, blockSize: 4, maximumWait: 100)
        mixer.append(source: 0, position: 0, samples: stereo(1, count: 8))
        mixer.append(source: 1, position: 0, samples: stereo(0.5, count: 2))
        #expect(mixer.nextBlock(now: 4) == nil, "waited for, it holds the block")
        let block = mixer.nextBlock(now: 4, unwaited: [1])
        #expect(block?.sources[0] == stereo(1, count: 4))
        #expect(block?.sources[1] == stereo(0.5, count: 2) + stereo(0, count: 2), "what it had, then nothing")
        mixer.append(source: 1, position: 2, samples: stereo(0.5, count: 6))
        #expect(mixer.perSourceCounters[1].notWaitedFor == 4, "2 missing at the cut, 2 that came after it")
        #expect(mixer.counters.silenceFilled == 0 && mixer.counters.discarded == 0)
        #expect(mixer.nextBlock(now: 8)?.sources[1] == stereo(0.5, count: 4), "waited for again, it is there")
    }

    @Test func aSourceWhoseFirstSamplesCameTooLateIsWaitedForAfterwards() {
        var mixer = AudioMixer(sourceCount: 1, blockSize: 4, maximumWait: 100, firstDataWait: 0)
        #expect(mixer.nextBlock(now: 4) != nil, "silence: nothing has been sent")
        #expect(mixer.nextBlock(now: 8) != nil)
        mixer.append(source: 0, position: 2, samples: stereo(1, count: 4))      // all before the cursor (8)
        #expect(mixer.counters.discarded == 4)
        #expect(mixer.nextBlock(now: 20) == nil, "waited for now: it has started")
        mixer.append(source: 0, position: 8, samples: stereo(1, count: 4))
        #expect(mixer.nextBlock(now: 20)?.sources[0] == stereo(1, count: 4))
    }

    @Test func gapsBecomeSilenceAndOverlapsAreTrimmed() {
        var mixer = AudioMixer(sourceCount: 1, blockSize: 4, maximumWait: 0)
        mixer.append(source: 0, position: 0, samples: stereo(1, count: 2))
        mixer.append(source: 0, position: 3, samples: stereo(1, count: 3))     // gap of 1
        mixer.append(source: 0, position: 5, samples: stereo(0.5, count: 3))   // overlap of 1
        let first = mixer.nextBlock(now: 4)
        #expect(first?.sources[0] == [1, 1, 1, 1, 0, 0, 1, 1])
        let second = mixer.nextBlock(now: 8)
        #expect(second?.sources[0] == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5])
        #expect(mixer.counters.silenceFilled == 1)
        #expect(mixer.counters.discarded == 1)
    }

    @Test func preRollBeforeTheStartIsNotCountedAsLoss() {
        var mixer = AudioMixer(sourceCount: 1, blockSize: 4, maximumWait: 0)
        mixer.append(source: 0, position: -6, samples: stereo(1, count: 10))
        #expect(mixer.nextBlock(now: 4)?.sources[0] == stereo(1, count: 4))
        #expect(mixer.counters == AudioMixer.Counters())
    }

    @Test func aSourceStartingLateIsPaddedFromTheStart() {
        var mixer = AudioMixer(sourceCount: 1, blockSize: 4, maximumWait: 100)
        mixer.append(source: 0, position: 2, samples: stereo(1, count: 2))
        #expect(mixer.nextBlock(now: 4)?.sources[0] == [0, 0, 0, 0, 1, 1, 1, 1])
    }

    @Test func mixingAddsWithGainsAndClips() {
        let mixed = AudioMixer.mix([[0.5, -0.5, 0.9], [0.25, -0.75, 0.9]], gains: [1, 1])
        #expect(mixed == [0.75, -1, 1])
        #expect(AudioMixer.mix([[0.5, 0.5], [0.25, 0.25]], gains: [1, 0]) == [0.5, 0.5])
    }
}

@Suite struct MediaTimeTests {
    @Test func convertsBetweenTimescalesRounding() {
        #expect(MediaTime(value: 1, timescale: 30).converted(to: 90_000).value == 3_000)
        #expect(MediaTime(nanoseconds: 1_000_000_000, timescale: 48_000).value == 48_000)
        #expect(MediaTime(value: 1, timescale: 3) == MediaTime(value: 30_000, timescale: 90_000))
        #expect(MediaTime(value: 1, timescale: 30) < MediaTime(value: 1, timescale: 29))
    }
}
