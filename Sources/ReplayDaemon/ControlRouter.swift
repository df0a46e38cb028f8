package import ReplayIPC

/// Who sent a request: the connection, and the peer as the kernel says (SO_PEERCRED).
package struct RequestContext: Sendable {
    package var connection: UInt64
    package var peer: PeerCredentials

    package init(connection: UInt64, peer: PeerCredentials) {
        self.connection = connection
        self.peer = peer
    }
}

/// replayd's requests by method name. Each feature registers its own methods (`on`), so a new
/// request is a new `ControlMethod` type and one registration beside its handler: no central switch.
/// A request whose fields do not decode is answered `bad-request`; an unknown method too.
package struct ControlRouter: Sendable {
    package typealias Handler = @Sendable (ControlRequest, RequestContext) async -> ControlResponse
    private var handlers: [String: Handler] = [:]

    package init() {}

    /// Answers `Method` requests with `handle`.
    package mutating func on<Method: ControlMethod>(
        _ method: Method.Type,
        _ handle: @escaping @Sendable (Method, RequestContext) async throws(ReplayError) -> Method.Answer
    ) {
        precondition(handlers[Method.method] == nil, "\(Method.method) is registered twice")
        handlers[Method.method] = { request, context in
            let decoded: Method
            do throws(ControlCodecError) {
                decoded = try request.decode(Method.self)
            } catch {
                return .failure(ReplayError(.badRequest, "the \"\(Method.method)\" request is malformed: \(error.message). See docs/PROTOCOL.md."))
            }
            do {
                let answer = try await handle(decoded, context)
                return .success(try ControlPayload(answer))
            } catch let error as ReplayError {
                return .failure(error)
            } catch {
                return .failure(ReplayError(.internal, "replayd could not encode its answer to \"\(Method.method)\": \(error)"))
            }
        }
    }

    package func answer(_ request: ControlRequest, context: RequestContext) async -> ControlResponse {
        guard let handler = handlers[request.method] else {
            return .failure(ReplayError(.badRequest, "replayd (protocol \(controlProtocolVersion)) does not know the request \"\(request.method)\": update replayd, or stop it so that a newer one starts."))
        }
        return await handler(request, context)
    }
}
