import Foundation
import Hummingbird
import NIOCore

/// The files under `Static/` (the pages' JavaScript and style sheet), copied into the module's resource
/// bundle by SwiftPM and served at `/static/NAME` with their content type. Read once, when first asked for.
enum StaticFiles {
    static let contentTypes = ["js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"]

    /// Name → bytes and content type, of every file in the bundle's `Static` folder.
    static let files: [String: (bytes: ByteBuffer, contentType: String)] = {
        guard let folder = Bundle.module.url(forResource: "Static", withExtension: nil),
              let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return [:] }
        var files: [String: (bytes: ByteBuffer, contentType: String)] = [:]
        for name in names {
            guard let type = contentTypes[(name as NSString).pathExtension],
                  let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else { continue }
            files[name] = (ByteBuffer(data: data), type)
        }
        return files
    }()

    static func addRoutes(to router: some RouterMethods<ServiceRequestContext>) {
        router.get("/static/:file") { _, context in
            guard let file = files[try context.parameters.require("file")] else { throw HTTPError(.notFound) }
            return Response(status: .ok, headers: [.contentType: file.contentType, .cacheControl: "no-cache"],
                            body: .init(byteBuffer: file.bytes))
        }
    }
}
