public import NIOCore
import Synchronization

/// The live output of one broadcast: the fMP4 init segment, the fragments since the latest keyframe
/// (what a joining viewer needs), the subscribed viewers, and the HLS segments.
///
/// Fragments arrive in order from one ingest loop; viewers read them through bounded streams. A viewer
/// that falls `viewerBufferLimit` fragments behind is disconnected (its player reconnects at the latest
/// keyframe) rather than slowing everyone down.
public final class LiveStream: Sendable {
    public struct HLSSegment: Sendable {
        public var sequence: Int
        public var duration: Int64
        public var bytes: ByteBuffer
    }

    struct State {
        var initSegment: ByteBuffer?
        var mimeType: String?
        var gop: [MP4Fragment] = []
        var subscribers: [Int: AsyncStream<ByteBuffer>.Continuation] = [:]
        var nextSubscriberID = 0
        var segments: [HLSSegment] = []
        var openSegment: (bytes: ByteBuffer, start: Int64, end: Int64)?
        var nextSegmentSequence = 0
        var ended = false
        var fragmentsReceived = 0
        var viewersDropped = 0
    }

    private let state = Mutex(State())
    public let viewerBufferLimit: Int
    public let hlsSegmentTarget: Int64
    public let hlsSegmentsKept: Int

    public init(viewerBufferLimit: Int = 300, hlsSegmentTarget: Int64 = 1000, hlsSegmentsKept: Int = 6) {
        self.viewerBufferLimit = viewerBufferLimit
        self.hlsSegmentTarget = hlsSegmentTarget
        self.hlsSegmentsKept = hlsSegmentsKept
    }

    func setInitSegment(_ bytes: ByteBuffer, mimeType: String) {
        state.withLock { s in
            s.initSegment = bytes
            s.mimeType = mimeType
            // Viewers who joined between the publish and the first media got nothing yet: init first.
            for continuation in s.subscribers.values { continuation.yield(bytes) }
        }
    }

    /// The MSE type of the stream, e.g. `video/mp4; codecs="avc1.42C01E,mp4a.40.2"`.
    public var mimeType: String? { state.withLock { $0.mimeType } }

    public var initSegment: ByteBuffer? { state.withLock { $0.initSegment } }
    public var viewerCount: Int { state.withLock { $0.subscribers.count } }
    public var fragmentsReceived: Int { state.withLock { $0.fragmentsReceived } }
    public var isEnded: Bool { state.withLock { $0.ended } }

    /// Publishes one fragment to every viewer and to HLS.
    func publish(_ fragment: MP4Fragment) {
        state.withLock { s in
            s.fragmentsReceived += 1
            if fragment.startsWithKeyframe { s.gop = [fragment] } else if !s.gop.isEmpty { s.gop.append(fragment) }
            for (id, continuation) in s.subscribers {
                if case .dropped = continuation.yield(fragment.bytes) {
                    continuation.finish()
                    s.subscribers[id] = nil
                    s.viewersDropped += 1
                }
            }
            // HLS: a segment starts at a keyframe and closes at the first keyframe after the target.
            if fragment.startsWithKeyframe, let open = s.openSegment, open.end - open.start >= hlsSegmentTarget {
                s.segments.append(HLSSegment(sequence: s.nextSegmentSequence, duration: open.end - open.start, bytes: open.bytes))
                s.nextSegmentSequence += 1
                if s.segments.count > hlsSegmentsKept { s.segments.removeFirst(s.segments.count - hlsSegmentsKept) }
                s.openSegment = nil
            }
            if s.openSegment == nil {
                if fragment.startsWithKeyframe {
                    s.openSegment = (fragment.bytes, fragment.startTime, fragment.startTime + fragment.duration)
                }
            } else {
                s.openSegment!.bytes.writeImmutableBuffer(fragment.bytes)
                s.openSegment!.end = fragment.startTime + fragment.duration
            }
        }
    }

    /// Ends the stream: viewers' streams finish.
    func end() {
        state.withLock { s in
            s.ended = true
            if let open = s.openSegment, open.end > open.start {
                s.segments.append(HLSSegment(sequence: s.nextSegmentSequence, duration: open.end - open.start, bytes: open.bytes))
                s.nextSegmentSequence += 1
                s.openSegment = nil
            }
            for continuation in s.subscribers.values { continuation.finish() }
            s.subscribers.removeAll()
        }
    }

    /// A viewer's stream: the init segment, the fragments since the latest keyframe, then live
    /// fragments. Finishes when the broadcast ends or the viewer falls too far behind.
    public func subscribe() -> (id: Int, fragments: AsyncStream<ByteBuffer>) {
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .bufferingOldest(viewerBufferLimit))
        let id = state.withLock { s -> Int in
            let id = s.nextSubscriberID
            s.nextSubscriberID += 1
            if s.ended { continuation.finish(); return id }
            if let initSegment = s.initSegment {
                continuation.yield(initSegment)
                for fragment in s.gop { continuation.yield(fragment.bytes) }
            }
            s.subscribers[id] = continuation
            return id
        }
        return (id, stream)
    }

    public func unsubscribe(_ id: Int) {
        let continuation = state.withLock { $0.subscribers.removeValue(forKey: id) }
        continuation?.finish()
    }

    // MARK: HLS

    /// The media playlist (fMP4 segments, version 7), or nil before the first segment.
    public func hlsPlaylist() -> String? {
        state.withLock { s -> String? in
            guard s.initSegment != nil, !s.segments.isEmpty else { return nil }
            let target = max(1, Int(((s.segments.map(\.duration).max() ?? 1000) + 999) / 1000))
            var lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:\(target)",
                         "#EXT-X-MEDIA-SEQUENCE:\(s.segments[0].sequence)", "#EXT-X-INDEPENDENT-SEGMENTS", "#EXT-X-MAP:URI=\"init.mp4\""]
            for segment in s.segments {
                lines.append("#EXTINF:\(Self.seconds(segment.duration)),")
                lines.append("seg\(segment.sequence).m4s")
            }
            if s.ended { lines.append("#EXT-X-ENDLIST") }
            return lines.joined(separator: "\n") + "\n"
        }
    }

    static func seconds(_ milliseconds: Int64) -> String {
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    public func hlsSegment(_ sequence: Int) -> ByteBuffer? {
        state.withLock { s in s.segments.first { $0.sequence == sequence }?.bytes }
    }
}
