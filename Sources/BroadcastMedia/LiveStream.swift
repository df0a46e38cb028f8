package import NIOCore
import Synchronization

/// A viewer of a live stream as `LiveStream` sees it: something on an event loop that takes ready-made
/// WebSocket frames (`WebSocketViewer` writes them straight to its socket).
package protocol LiveViewer: AnyObject, Sendable {
    /// The loop the viewer is written on; `write`, `flush` and `finish` are only called there.
    var eventLoop: any EventLoop { get }
    /// Queues messages for the viewer, in order.
    func write(_ messages: ArraySlice<LiveMessage>)
    /// Sends what was queued. False when the viewer has fallen too far behind: it closed itself.
    func flush() -> Bool
    /// The broadcast ended: close after what was sent.
    func finish()
}

/// One message for viewers, framed once for all of them.
package struct LiveMessage: Sendable {
    /// A whole WebSocket frame (header and payload).
    package var frame: ByteBuffer
    /// Milliseconds of media in it (0 for an event).
    package var media: Int64
}

/// The live output of one broadcast: the fMP4 init segment, the fragments since the latest keyframe
/// (what a joining viewer needs), the viewers, and the HLS segments.
///
/// Fragments arrive in order from one ingest loop. Each fragment is framed as a WebSocket message once,
/// and the same bytes are written to every viewer. Viewers are grouped by their event loop; a group has
/// one queue and at most one pending drain on its loop. An idle loop writes every fragment as it comes;
/// a busy one writes all the messages that arrived meanwhile in one go (one system call per viewer). A
/// viewer with more than `maximumViewerLag` milliseconds of media its socket has not taken is
/// disconnected (its player reconnects at the latest keyframe) rather than slowing everyone down.
package final class LiveStream: Sendable {
    package struct HLSSegment: Sendable {
        package var sequence: Int
        package var duration: Int64
        package var bytes: ByteBuffer
    }

    /// The viewers on one event loop and what waits to be written to them.
    struct Group {
        let eventLoop: any EventLoop
        var viewers: [Member] = []
        /// Messages since the last drain; the first is number `firstSequence`.
        var pending: [LiveMessage] = []
        var firstSequence = 0
        var drainScheduled = false
        var ending = false
    }

    struct Member {
        let id: Int
        let viewer: any LiveViewer
        /// The first live message for this viewer (earlier ones are in its `joining` messages).
        let fromSequence: Int
        /// The stream event, init segment and current keyframe group, written before anything else.
        var joining: [LiveMessage]
    }

    struct State {
        var initSegment: ByteBuffer?
        var mimeType: String?
        /// How many times the init segment changed (the publisher's picture size did): HLS names it by this.
        var initVersion = 0
        /// The messages since the latest keyframe: what a joining viewer gets first.
        var gopMessages: [LiveMessage] = []
        var groups: [ObjectIdentifier: Group] = [:]
        var viewerLoops: [Int: ObjectIdentifier] = [:]
        var nextSubscriberID = 0
        /// Number of the next message appended to the groups' queues.
        var nextSequence = 0
        var segments: [HLSSegment] = []
        var openSegment: (bytes: ByteBuffer, start: Int64, end: Int64)?
        var nextSegmentSequence = 0
        var ended = false
        var fragmentsReceived = 0
        var viewersDropped = 0
    }

    private let state = Mutex(State())
    /// The latest keyframe with its decoder configuration, for the broadcast's thumbnail.
    package let latestKeyframe = LatestKeyframe()
    /// Milliseconds of live media a viewer may have outstanding (written, not yet taken by its socket).
    package let maximumViewerLag: Int64
    package let hlsSegmentTarget: Int64
    package let hlsSegmentsKept: Int

    package init(maximumViewerLag: Int64 = 10_000, hlsSegmentTarget: Int64 = 1000, hlsSegmentsKept: Int = 6) {
        self.maximumViewerLag = maximumViewerLag
        self.hlsSegmentTarget = hlsSegmentTarget
        self.hlsSegmentsKept = hlsSegmentsKept
    }

    /// Sets the stream's type and init segment, and sends them to the viewers. A second call (a new
    /// picture size mid-stream) starts again: what a joining viewer gets and the HLS segments kept
    /// belong to the old init segment, and are dropped; the next fragment starts at a keyframe.
    package func setInitSegment(_ bytes: ByteBuffer, mimeType: String) {
        state.withLock { s in
            if s.initSegment != nil {
                s.initVersion += 1
                s.gopMessages = []
                s.segments = []
                s.openSegment = nil
            }
            s.initSegment = bytes
            s.mimeType = mimeType
            // Viewers who joined between the publish and the first media got nothing yet: type and init first.
            broadcast(Self.startMessages(mimeType: mimeType, initSegment: bytes), in: &s)
        }
    }

    /// The MSE type of the stream, e.g. `video/mp4; codecs="avc1.42C01E,mp4a.40.2"`.
    package var mimeType: String? { state.withLock { $0.mimeType } }

    package var initSegment: ByteBuffer? { state.withLock { $0.initSegment } }
    package var viewerCount: Int { state.withLock { $0.viewerLoops.count } }
    package var fragmentsReceived: Int { state.withLock { $0.fragmentsReceived } }
    package var viewersDropped: Int { state.withLock { $0.viewersDropped } }
    package var isEnded: Bool { state.withLock { $0.ended } }

    /// Publishes one fragment to every viewer and to HLS.
    package func publish(_ fragment: MP4Fragment) {
        let message = LiveMessage(frame: WebSocketFraming.frame(binary: fragment.bytes), media: fragment.duration)
        state.withLock { s in
            s.fragmentsReceived += 1
            if fragment.startsWithKeyframe {
                s.gopMessages = [message]
            } else if !s.gopMessages.isEmpty {
                s.gopMessages.append(message)
            }
            broadcast([message], in: &s)
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

    /// Sends a JSON event (text) to every viewer, in order with the media.
    package func sendToViewers(text: String) {
        let message = LiveMessage(frame: WebSocketFraming.frame(text: text), media: 0)
        state.withLock { s in
            guard !s.ended else { return }
            broadcast([message], in: &s)
        }
    }

    /// Ends the stream: viewers are closed once what was queued for them is written.
    package func end() {
        state.withLock { s in
            s.ended = true
            if let open = s.openSegment, open.end > open.start {
                s.segments.append(HLSSegment(sequence: s.nextSegmentSequence, duration: open.end - open.start, bytes: open.bytes))
                s.nextSegmentSequence += 1
                s.openSegment = nil
            }
            for key in s.groups.keys {
                s.groups[key]!.ending = true
                schedule(key, in: &s)
            }
            s.viewerLoops.removeAll()
        }
    }

    /// Adds a viewer: it gets the stream type, the init segment, the fragments since the latest keyframe,
    /// then live fragments and events. A viewer added after the end is finished at once.
    package func subscribe(_ viewer: any LiveViewer) -> Int {
        state.withLock { s in
            let id = s.nextSubscriberID
            s.nextSubscriberID += 1
            let key = ObjectIdentifier(viewer.eventLoop)
            if s.groups[key] == nil { s.groups[key] = Group(eventLoop: viewer.eventLoop) }
            var joining: [LiveMessage] = []
            if let initSegment = s.initSegment, let mimeType = s.mimeType {
                // The keyframe group is a burst every joiner gets: not counted against its lag.
                joining = Self.startMessages(mimeType: mimeType, initSegment: initSegment)
                    + s.gopMessages.map { LiveMessage(frame: $0.frame, media: 0) }
            }
            s.groups[key]!.viewers.append(Member(id: id, viewer: viewer, fromSequence: s.nextSequence, joining: joining))
            if s.ended {
                s.groups[key]!.ending = true
            } else {
                s.viewerLoops[id] = key
            }
            schedule(key, in: &s)
            return id
        }
    }

    package func unsubscribe(_ id: Int) {
        state.withLock { s in
            guard let key = s.viewerLoops.removeValue(forKey: id) else { return }
            s.groups[key]?.viewers.removeAll { $0.id == id }
        }
    }

    private static func startMessages(mimeType: String, initSegment: ByteBuffer) -> [LiveMessage] {
        [LiveMessage(frame: WebSocketFraming.frame(text: #"{"type":"stream","mime":"# + WebSocketFraming.jsonString(mimeType) + "}"), media: 0),
         LiveMessage(frame: WebSocketFraming.frame(binary: initSegment), media: 0)]
    }

    /// Appends messages to every group's queue and makes sure each group drains.
    private func broadcast(_ messages: [LiveMessage], in s: inout State) {
        let first = s.nextSequence
        s.nextSequence += messages.count
        for key in s.groups.keys {
            if s.groups[key]!.viewers.isEmpty {
                s.groups[key]!.pending = []
                continue
            }
            if s.groups[key]!.pending.isEmpty { s.groups[key]!.firstSequence = first }
            s.groups[key]!.pending += messages
            schedule(key, in: &s)
        }
    }

    private func schedule(_ key: ObjectIdentifier, in s: inout State) {
        guard var group = s.groups[key], !group.drainScheduled else { return }
        group.drainScheduled = true
        s.groups[key] = group
        group.eventLoop.execute { self.drain(key) }
    }

    /// On the group's loop: writes everything queued to each of its viewers, one flush each.
    private func drain(_ key: ObjectIdentifier) {
        guard let (members, pending, first, ending) = state.withLock({ s -> ([Member], [LiveMessage], Int, Bool)? in
            guard var group = s.groups[key] else { return nil }
            let taken = (group.viewers, group.pending, group.firstSequence, group.ending)
            group.drainScheduled = false
            group.pending = []
            for i in group.viewers.indices { group.viewers[i].joining = [] }
            if group.ending { group.viewers = [] }
            s.groups[key] = group
            return taken
        }) else { return }
        var dropped: [Int] = []
        for member in members {
            if !member.joining.isEmpty { member.viewer.write(member.joining[...]) }
            let from = max(0, member.fromSequence - first)
            if from < pending.count { member.viewer.write(pending[from...]) }
            if !member.viewer.flush() { dropped.append(member.id) }
            if ending { member.viewer.finish() }
        }
        guard !dropped.isEmpty else { return }
        state.withLock { s in
            for id in dropped where s.viewerLoops.removeValue(forKey: id) != nil {
                s.groups[key]?.viewers.removeAll { $0.id == id }
                s.viewersDropped += 1
            }
        }
    }

    // MARK: HLS

    /// The media playlist (fMP4 segments, version 7), or nil before the first segment.
    package func hlsPlaylist() -> String? {
        state.withLock { s -> String? in
            guard s.initSegment != nil, !s.segments.isEmpty else { return nil }
            let target = max(1, Int(((s.segments.map(\.duration).max() ?? 1000) + 999) / 1000))
            var lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:\(target)",
                         "#EXT-X-MEDIA-SEQUENCE:\(s.segments[0].sequence)", "#EXT-X-INDEPENDENT-SEGMENTS", "#EXT-X-MAP:URI=\"\(Self.initName(version: s.initVersion))\""]
            for segment in s.segments {
                lines.append("#EXTINF:\(Self.seconds(segment.duration)),")
                lines.append("seg\(segment.sequence).m4s")
            }
            if s.ended { lines.append("#EXT-X-ENDLIST") }
            return lines.joined(separator: "\n") + "\n"
        }
    }

    /// The init segment's name in the playlist: a new name for each new one, so that a player loads it.
    package static func initName(version: Int) -> String {
        version == 0 ? "init.mp4" : "init-\(version).mp4"
    }

    static func seconds(_ milliseconds: Int64) -> String {
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    package func hlsSegment(_ sequence: Int) -> ByteBuffer? {
        state.withLock { s in s.segments.first { $0.sequence == sequence }?.bytes }
    }
}

/// Server-to-client WebSocket frames (RFC 6455 §5.2: FIN, opcode, unmasked length), built once per
/// message and shared by every viewer.
enum WebSocketFraming {
    static func frame(binary payload: ByteBuffer) -> ByteBuffer { frame(opcode: 0x2, payload) }
    static func frame(text: String) -> ByteBuffer { frame(opcode: 0x1, ByteBuffer(string: text)) }

    static func frame(opcode: UInt8, _ payload: ByteBuffer) -> ByteBuffer {
        let length = payload.readableBytes
        var frame = ByteBuffer()
        frame.reserveCapacity(length + 10)
        frame.writeInteger(0x80 | opcode)
        if length < 126 {
            frame.writeInteger(UInt8(length))
        } else if length <= 0xFFFF {
            frame.writeInteger(UInt8(126))
            frame.writeInteger(UInt16(length))
        } else {
            frame.writeInteger(UInt8(127))
            frame.writeInteger(UInt64(length))
        }
        frame.writeImmutableBuffer(payload)
        return frame
    }

    /// `value` as a JSON string literal.
    static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
