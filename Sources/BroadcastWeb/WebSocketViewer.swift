import BroadcastMedia
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// How much media a viewer has outstanding: written to its channel, not yet taken by its socket.
struct ViewerBacklog {
    /// Milliseconds of media outstanding.
    private(set) var milliseconds: Int64 = 0
    /// Disconnect above this many milliseconds.
    var limit: Int64

    /// Before writing: false when the viewer is too far behind to keep.
    func admits() -> Bool { milliseconds <= limit }
    mutating func wrote(_ media: Int64) { milliseconds += media }
    mutating func taken(_ media: Int64) { milliseconds -= media }
}

/// Writes a viewer's pre-framed WebSocket messages at the head of its channel's pipeline, under
/// Hummingbird's WebSocket handler (whose own frames — pings, the close — pass through unchanged).
final class ViewerWriteHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?
    var backlog: ViewerBacklog
    /// Media written since the last flush.
    private var unflushed: Int64 = 0
    private var held: ByteBuffer?
    private var closed = false

    init(maximumLag: Int64) { backlog = ViewerBacklog(limit: maximumLag) }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func write(_ messages: ArraySlice<LiveMessage>) {
        guard let context, !closed else { return }
        for message in messages {
            // The newest message is kept back to carry the flush's promise.
            if let held { context.write(wrapOutboundOut(held), promise: nil) }
            held = message.frame
            unflushed += message.media
        }
    }

    func flush() -> Bool {
        guard let context, !closed else { return true }
        guard backlog.admits() else {
            closed = true
            held = nil
            context.close(promise: nil)
            return false
        }
        guard let last = held else { return true }
        held = nil
        let media = unflushed
        unflushed = 0
        guard media > 0 else {
            context.writeAndFlush(wrapOutboundOut(last), promise: nil)
            return true
        }
        backlog.wrote(media)
        // Writes complete in order: this promise completes once everything before it reached the socket.
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(last), promise: promise)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        promise.futureResult.whenComplete { _ in bound.value.backlog.taken(media) }
        return true
    }
}

/// A browser viewer's WebSocket as a `LiveViewer`.
final class WebSocketViewer: LiveViewer {
    let eventLoop: any EventLoop
    private let handler: NIOLoopBound<ViewerWriteHandler>
    private let finished: AsyncStream<Void>
    private let finishing: AsyncStream<Void>.Continuation

    /// Adds the write handler at the head of `channel`'s pipeline.
    init(channel: any Channel, maximumLag: Int64) async throws {
        eventLoop = channel.eventLoop
        (finished, finishing) = AsyncStream<Void>.makeStream()
        handler = try await channel.eventLoop.submit {
            let handler = ViewerWriteHandler(maximumLag: maximumLag)
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
            return NIOLoopBound(handler, eventLoop: channel.eventLoop)
        }.get()
    }

    func write(_ messages: ArraySlice<LiveMessage>) { handler.value.write(messages) }
    func flush() -> Bool { handler.value.flush() }
    func finish() { finishing.finish() }

    /// Returns when the broadcast has ended for this viewer.
    func waitUntilFinished() async {
        for await _ in finished {}
    }
}
