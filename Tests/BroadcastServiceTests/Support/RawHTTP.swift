import Foundation

/// HTTP over a plain TCP socket, for requests no HTTP client would send (malformed, oversized, slow).
final class RawConnection {
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address stands for another client).
    init(port: Int, source: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(errno)") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0 else { close(descriptor); throw TestFailure("bind \(source): \(errno)") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { close(descriptor); throw TestFailure("connect: \(errno)") }
    }

    deinit { close(descriptor) }

    /// Sends `bytes` in pieces, stopping early when the server answers (it may refuse before the end).
    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if Glibc.poll(&poll, 1, 0) > 0 { return }
            let n = bytes[offset...].prefix(4096).withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Reads until the server closes the connection or `timeout` seconds pass.
    func readUntilClosed(timeout: Double) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Glibc.poll(&poll, 1, 50)
            guard ready > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return (String(decoding: received, as: UTF8.self), true) }
            received += buffer[0..<n]
        }
        return (String(decoding: received, as: UTF8.self), false)
    }

    /// Reads one response with a Content-Length body (or up to `timeout`).
    func readResponse(timeout: Double) -> String {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let length = text.firstMatch(of: /(?i)content-length: *(\d+)/).flatMap { Int($0.1) } ?? 0
                if text.utf8.distance(from: end.upperBound.samePosition(in: text.utf8)!, to: text.utf8.endIndex) >= length { return text }
            }
            var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, 50) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += buffer[0..<n]
        }
        return String(decoding: received, as: UTF8.self)
    }
}
