import BroadcastStore
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The request context of the service's routes: Hummingbird's WebSocket context plus the connection's
/// NIO channel, which a viewer's media is written to directly (`WebSocketViewer`), and who is asking:
/// the signed-in account (`SessionMiddleware`) or the stream key of an extension (`StreamKeyMiddleware`).
struct ServiceRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel
    /// The account of the request's session cookie, if it has a valid one.
    var user: UserRecord?
    /// The active stream key of the request's `Authorization: Bearer` (or, on a WebSocket upgrade, `?token=`).
    var streamKey: StreamKeyRecord?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
