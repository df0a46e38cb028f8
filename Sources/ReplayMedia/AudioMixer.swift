/// Lines up PCM from several sources (system audio, microphone) on the recording's one timeline
/// and cuts it into encoder blocks. Positions are sample counts since the recording started.
///
/// A source that falls behind is waited for up to `maximumWait` samples past a block's end; then
/// its missing part is silence, and counted. Samples that come too late for a block already cut,
/// and overlaps after a source re-anchors its clock, are discarded and counted too: nothing is lost
/// without a number saying so. Pure value type: no I/O, no clock.
package struct AudioMixer: Sendable {
    package struct Counters: Sendable, Equatable {
        /// Samples of silence put where a source had nothing (a gap, or a source too late).
        package var silenceFilled = 0
        /// Samples a source delivered too late (their block was already cut) or twice (overlap).
        package var discarded = 0
        /// Samples of a source that was not waited for (`nextBlock(now:unwaited:)`: its gain was 0
        /// for that block), missing when the block was cut or dropped when they came later.
        package var notWaitedFor = 0
        package init() {}
    }

    private struct Source: Sendable {
        var samples: [Float] = []      // interleaved
        var start: Int64? = nil        // position of samples[0]
        var unwaitedThrough: Int64 = 0 // blocks before this were cut without waiting for it
        var end: Int64? { start.map { $0 + Int64(samples.count / AudioMixer.channels) } }
    }

    package static let channels = 2
    package let blockSize: Int
    /// How far past a block's end a missing source is waited for, in samples. Raised (never
    /// lowered) to what the sources' latency needs: some deliver in bursts of up to seconds.
    package var maximumWait: Int
    private var sources: [Source]
    /// Position of the next block to cut.
    package private(set) var cursor: Int64 = 0
    package private(set) var counters = Counters()
    package private(set) var perSourceCounters: [Counters]

    /// How far past a block's end a source that has delivered nothing yet is waited for: a sound
    /// server can take seconds to send a new stream's first samples (a recording waits); a live
    /// stream whose microphone is off does not wait for it at all (a short wait).
    package let firstDataWait: Int

    package init(sourceCount: Int, blockSize: Int, maximumWait: Int, firstDataWait: Int? = nil) {
        self.blockSize = blockSize
        self.maximumWait = maximumWait
        self.firstDataWait = firstDataWait ?? maximumWait
        self.sources = Array(repeating: Source(), count: sourceCount)
        self.perSourceCounters = Array(repeating: Counters(), count: sourceCount)
    }

    /// Adds interleaved stereo samples of `source` whose first sample is at `position`.
    package mutating func append(source index: Int, position: Int64, samples: some Collection<Float>) {
        var position = position
        var input = Array(samples)
        // Before the recording's start (pre-roll) or for blocks already cut: too late.
        if position < cursor {
            let skip = Int(min(Int64(input.count / Self.channels), cursor - position))
            let notWaitedFor = Int(max(0, min(position + Int64(skip), sources[index].unwaitedThrough) - max(position, 0)))
            perSourceCounters[index].notWaitedFor += notWaitedFor
            if position + Int64(skip) > 0 { count(discarded: Int(position + Int64(skip) - max(position, 0)) - notWaitedFor, source: index) }
            input.removeFirst(skip * Self.channels)
            position += Int64(skip)
        }
        guard !input.isEmpty else {
            // A source whose first samples all came too late has still started: from now on it is
            // waited for as one that sends (`maximumWait`), not cut past as one that never does.
            if sources[index].start == nil, position > 0 {
                sources[index].start = cursor
                sources[index].samples = []
            }
            return
        }
        // The source is changed where it lies (`sources[index].…`), never through a copy: a copy
        // shares the samples' storage, so each append and each cut would allocate and copy all the
        // samples waiting, a hundred times a second.
        if let end = sources[index].end {
            if position > end {
                let gap = Int(position - end)
                sources[index].samples.append(contentsOf: repeatElement(0, count: gap * Self.channels))
                count(silence: gap, source: index)
            } else if position < end {
                let overlap = min(Int(end - position), input.count / Self.channels)
                input.removeFirst(overlap * Self.channels)
                count(discarded: overlap, source: index)
            }
            sources[index].samples.append(contentsOf: input)
        } else {
            if position > cursor {
                // The first samples arrive after the start: what came before is silence.
                sources[index].start = cursor
                sources[index].samples = Array(repeating: 0, count: Int(position - cursor) * Self.channels)
                sources[index].samples.append(contentsOf: input)
            } else {
                sources[index].start = position
                sources[index].samples = input
            }
        }
    }

    /// The next block, one array of `blockSize` interleaved stereo samples per source, if every
    /// source has reached its end or `now` (the live position) is `maximumWait` past it. Sources in
    /// `unwaited` are not waited for: what they have of the block is taken, the rest is silence
    /// (counted as `notWaitedFor`, as are their samples for it that come later).
    package mutating func nextBlock(now: Int64, unwaited: Set<Int> = []) -> (position: Int64, sources: [[Float]])? {
        let blockEnd = cursor + Int64(blockSize)
        // (By index, not through copies of the sources: a copy would share their samples' storage
        // and make the cut below copy it.)
        let unstarted = sources.indices.contains { !unwaited.contains($0) && sources[$0].start == nil }
        // Every source that has delivered reaches the block's end: only those that never did may be missing.
        let startedThere = sources.indices.allSatisfy {
            unwaited.contains($0) || sources[$0].start == nil || (sources[$0].end ?? Int64.min) >= blockEnd
        }
        let ready: Bool
        if !unstarted && startedThere {
            ready = true
        } else if startedThere {
            // Only sources that have sent nothing yet are missing (a microphone that is off for a
            // live stream, a sound server slow to start a new stream): waited for `firstDataWait`.
            ready = now >= blockEnd + Int64(firstDataWait)
        } else {
            ready = now >= blockEnd + Int64(unstarted ? max(firstDataWait, maximumWait) : maximumWait)
        }
        guard ready else { return nil }
        var blocks: [[Float]] = []
        blocks.reserveCapacity(sources.count)
        for index in sources.indices {
            var block = [Float](repeating: 0, count: blockSize * Self.channels)
            // Invariant: a source that has started begins exactly at the cursor.
            let have = sources[index].start == nil ? 0 : min(blockSize, sources[index].samples.count / Self.channels)
            if have > 0 {
                block.replaceSubrange(0..<(have * Self.channels), with: sources[index].samples[0..<(have * Self.channels)])
                sources[index].samples.removeFirst(have * Self.channels)
            }
            if sources[index].start != nil { sources[index].start = blockEnd }
            if have < blockSize {
                if unwaited.contains(index) {
                    perSourceCounters[index].notWaitedFor += blockSize - have
                    sources[index].unwaitedThrough = blockEnd
                } else {
                    count(silence: blockSize - have, source: index)
                }
            }
            blocks.append(block)
        }
        let position = cursor
        cursor = blockEnd
        return (position, blocks)
    }

    private mutating func count(silence: Int, source: Int) {
        counters.silenceFilled += silence
        perSourceCounters[source].silenceFilled += silence
    }

    private mutating func count(discarded: Int, source: Int) {
        counters.discarded += discarded
        perSourceCounters[source].discarded += discarded
    }

    /// Adds `blocks` sample by sample into one block, clipped to [-1, 1]; `gains` per source (0 mutes).
    package static func mix(_ blocks: [[Float]], gains: [Float]) -> [Float] {
        guard var out = blocks.first.map({ [Float](repeating: 0, count: $0.count) }) else { return [] }
        for (block, gain) in zip(blocks, gains) where gain != 0 {
            for i in out.indices { out[i] += block[i] * gain }
        }
        for i in out.indices { out[i] = min(1, max(-1, out[i])) }
        return out
    }
}
