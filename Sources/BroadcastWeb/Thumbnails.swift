import BroadcastMedia
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Live thumbnails: a JPEG of each broadcast's latest keyframe, made when someone asks for it and kept
/// for `maximumAge`, so a broadcast costs at most one decode per `maximumAge` however many look, and
/// nothing while nobody does.
///
/// The decoding (libavcodec H.264 → libswscale → libavcodec MJPEG) is blocking C work: it runs on
/// `worker`, a thread pool of one thread of its own (never the cooperative pool or an event loop), one
/// picture after another; a request that waited behind another for the same broadcast takes its result.
final class ThumbnailCache: Sendable {
    /// One thumbnail as served.
    struct Image: Sendable {
        var jpeg: ByteBuffer
        /// Strong validator: a hash of the bytes, quoted.
        var etag: String
        /// Wall-clock time it was made (`Last-Modified`), whole seconds.
        var made: Date
        /// When it was made, for its age.
        var madeAt: ContinuousClock.Instant
        /// The keyframe it shows.
        var keyframeSerial: Int
        /// CPU time the worker thread spent making it.
        var renderCPU: Duration
    }

    let worker: NIOThreadPool
    let maximumAge: Duration
    /// Width of a thumbnail in pixels (a card shows it at about 320 CSS pixels; room for 1.5× screens).
    let width: Int
    let logger: Logger
    private let images = Mutex<[String: Image]>([:])

    init(worker: NIOThreadPool, maximumAge: Duration = .seconds(10), width: Int = 480, logger: Logger) {
        self.worker = worker
        self.maximumAge = maximumAge
        self.width = width
        self.logger = logger
    }

    /// The thumbnail of `broadcast`, made now if the cached one is older than `maximumAge` and a newer
    /// keyframe came since. Nil before the first keyframe.
    func image(of broadcast: LiveBroadcast) async throws -> Image? {
        let id = broadcast.record.id
        let cached = images.withLock { $0[id] }
        if let cached, ContinuousClock.now - cached.madeAt < maximumAge { return cached }
        guard let keyframe = broadcast.stream.latestKeyframe.current else { return cached }
        if let cached, cached.keyframeSerial == keyframe.serial {
            // The same picture (a long keyframe interval): it stays valid; look again in `maximumAge`.
            return images.withLock { images in
                images[id]?.madeAt = .now
                return images[id] ?? cached
            }
        }
        let maximumAge = maximumAge, width = width
        return try await worker.runIfActive { [self] () throws -> Image in
            // Another request may have made it while this one waited for the worker.
            if let latest = images.withLock({ $0[id] }), latest.keyframeSerial == keyframe.serial
                || ContinuousClock.now - latest.madeAt < maximumAge {
                return latest
            }
            let start = ThreadCPUClock.now
            let jpeg = try ThumbnailDecoder.jpeg(of: keyframe, width: width)
            let image = Image(jpeg: ByteBuffer(bytes: jpeg), etag: Self.etag(jpeg),
                              made: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)),
                              madeAt: .now, keyframeSerial: keyframe.serial, renderCPU: ThreadCPUClock.now - start)
            images.withLock { $0[id] = image }
            return image
        }
    }

    /// Drops the thumbnail of a broadcast that ended.
    func forget(_ id: String) {
        _ = images.withLock { $0.removeValue(forKey: id) }
    }

    /// A quoted FNV-1a hash of the bytes: the same picture gets the same tag, in any process.
    static func etag(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
    }
}

/// The CPU time of the calling thread.
enum ThreadCPUClock {
    static var now: Duration {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
}

/// `GET /b/{id}/thumbnail.jpg`: the broadcast's thumbnail with caching headers (`Cache-Control: max-age`
/// for what is left of its 10 s, `ETag`, `Last-Modified`; 304 for a matching `If-None-Match` or a
/// not-older `If-Modified-Since`). `Server-Timing` carries the CPU milliseconds it took to make.
struct ThumbnailRoutes: Sendable {
    let directory: LiveDirectory

    func addRoutes(to router: some RouterMethods<ServiceRequestContext>) {
        let directory = self.directory
        router.get("/b/:id/thumbnail.jpg") { request, context in
            guard let broadcast = directory.broadcast(id: try context.parameters.require("id")) else {
                throw HTTPError(.notFound, message: "The broadcast is not live.")
            }
            let image: ThumbnailCache.Image?
            do {
                image = try await directory.thumbnails.image(of: broadcast)
            } catch {
                directory.logger.warning("Thumbnail failed", metadata: ["broadcast": "\(broadcast.record.id)", "error": "\(error)"])
                throw HTTPError(.serviceUnavailable, message: "The thumbnail could not be made.")
            }
            guard let image else {
                throw HTTPError(.notFound, headers: [.retryAfter: "2"], message: "No picture yet.")
            }
            return Self.response(image, to: request, maximumAge: directory.thumbnails.maximumAge)
        }
    }

    static func response(_ image: ThumbnailCache.Image, to request: Request, maximumAge: Duration) -> Response {
        let left = max(1, Int((maximumAge - (ContinuousClock.now - image.madeAt)).components.seconds))
        let cpu = Double(image.renderCPU.components.attoseconds) / 1e15 + Double(image.renderCPU.components.seconds) * 1000
        let headers: HTTPFields = [
            .contentType: "image/jpeg",
            .cacheControl: "max-age=\(left)",
            .eTag: image.etag,
            .lastModified: HTTPDate.format(image.made),
            .init("Server-Timing")!: "render;dur=\((cpu * 100).rounded() / 100);desc=\"CPU ms to make\"",
        ]
        if let tags = request.headers[.ifNoneMatch] {
            let matches = tags.split(separator: ",").contains { tag in
                let tag = tag.trimmingCharacters(in: .whitespaces)
                return tag == "*" || tag == image.etag || tag == "W/" + image.etag
            }
            if matches { return Response(status: .notModified, headers: headers) }
        } else if let since = request.headers[.ifModifiedSince].flatMap(HTTPDate.parse), image.made <= since {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: image.jpeg))
    }
}

/// HTTP dates (RFC 9110 IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`), in UTC, without a formatter.
enum HTTPDate {
    static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    static func parse(_ text: String) -> Date? {
        // "Sun, 06 Nov 1994 08:49:37 GMT"
        let fields = text.split(separator: " ")
        guard fields.count == 6, fields[5] == "GMT", let day = Int32(fields[1]),
              let month = months.firstIndex(of: String(fields[2])), let year = Int32(fields[3]) else { return nil }
        let clock = fields[4].split(separator: ":").compactMap { Int32($0) }
        guard clock.count == 3 else { return nil }
        var parts = tm()
        parts.tm_mday = day
        parts.tm_mon = Int32(month)
        parts.tm_year = year - 1900
        parts.tm_hour = clock[0]
        parts.tm_min = clock[1]
        parts.tm_sec = clock[2]
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}
