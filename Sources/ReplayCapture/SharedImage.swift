import CXCB
#if canImport(Glibc)
import Glibc
#endif

/// A System V shared-memory segment attached to the X server (MIT-SHM), so that `GetImage`
/// writes pixels straight into our memory. Owns the segment and its attachment.
final class SharedImage {
    /// Kept alive by the image: the segment must be detached before the connection closes.
    private let owner: XConnection
    private var connection: OpaquePointer { owner.connection }
    let segment: xcb_shm_seg_t
    let address: UnsafeMutableRawPointer
    let byteCount: Int

    init?(owner: XConnection, byteCount: Int) {
        let connection = owner.connection
        let id = shmget(0 /* IPC_PRIVATE */, byteCount, IPC_CREAT | 0o600)
        guard id >= 0 else { return nil }
        guard let address = shmat(id, nil, 0), address != UnsafeMutableRawPointer(bitPattern: -1) else {
            shmctl(id, IPC_RMID, nil)
            return nil
        }
        let segment = xcb_generate_id(connection)
        let error = xcb_request_check(connection, xcb_shm_attach_checked(connection, segment, UInt32(id), 0))
        // Marked for removal now: it goes away when both we and the server detach, even after a crash.
        shmctl(id, IPC_RMID, nil)
        if let error {
            free(error)
            shmdt(address)
            return nil
        }
        self.owner = owner
        self.segment = segment
        self.address = address
        self.byteCount = byteCount
    }

    deinit {
        xcb_shm_detach(connection, segment)
        xcb_flush(connection)
        shmdt(address)
    }

    /// Reads `rect` (in `drawable` coordinates) into the segment, rows of `rect.width * 4` bytes.
    func read(_ drawable: xcb_drawable_t, _ rect: PixelRect) -> Bool {
        let cookie = xcb_shm_get_image(connection, drawable, Int16(rect.x), Int16(rect.y), UInt16(rect.width), UInt16(rect.height),
                                       ~0, UInt8(XCB_IMAGE_FORMAT_Z_PIXMAP.rawValue), segment, 0)
        var error: UnsafeMutablePointer<xcb_generic_error_t>?
        let reply = xcb_shm_get_image_reply(connection, cookie, &error)
        free(error)
        guard let reply else { return false }
        free(reply)
        return true
    }
}
