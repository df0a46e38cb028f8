import CXCB
#if canImport(Glibc)
import Glibc
#endif

/// One top-level window as a capture sees it: the root's child (a window manager's frame, or the
/// client itself without one) and the client window inside it (the one with `WM_STATE`, found as
/// `xprop` and `xdotool` find it).
struct TopLevelWindow: Equatable {
    /// The root's child: what stacks, what a window manager moves.
    var frame: xcb_window_t
    /// The application's own window (`frame` itself when there is no window manager).
    var client: xcb_window_t
    /// `frame`'s rectangle with its border, root coordinates.
    var outer: PixelRect
    /// `client`'s rectangle with its border (what its Composite pixmap holds), root coordinates.
    var clientRect: PixelRect
    var clientDepth: UInt8
    /// `client`'s border width: its pixmap (and `clientRect`) starts that far outside its origin.
    var clientBorder: Int
    /// The process that owns `client` (X-Resource; `_NET_WM_PID` when the server cannot say).
    var pid: Int32?
    /// `_OPENREPLAYKIT_PROTECTED` = 1 on the client: blanked in every frame.
    var isProtected: Bool
    /// OpenReplayKit's own windows (WM_CLASS instance `openreplaykit-…` or `replayd-indicator`):
    /// never in a frame.
    var isSystemUI: Bool
    /// For a protected window: its bounding shape in root coordinates (its rectangle when unshaped).
    var shape: [PixelRect]
    /// Viewable windows inside `client` that are not plainly its own: made by another process (or one
    /// X-Resource cannot name), or protected. Composite draws a window's children into its pixmap, so
    /// a window reparented into an application's would otherwise show in that application's recording.
    var inner: [InnerWindow] = []
}

/// A viewable window below a client window, as `TopLevelWindow.inner` keeps it.
struct InnerWindow: Equatable {
    var window: xcb_window_t
    /// Its rectangle with its border, root coordinates.
    var rect: PixelRect
    /// The process that made it (X-Resource), nil when the server cannot say.
    var pid: Int32?
    var isProtected: Bool
}

/// What a capture knows of the display's top-level windows, kept up to date from X events: which
/// windows there are, bottom to top, where, whose, protected or not, and which are OpenReplayKit's
/// own. `note(_:)` sees every event of the capture's connection and marks the census stale when the
/// windows may have changed; `refresh()` asks the server again (pipelined: one round trip per level).
///
/// Used by one thread (the capture's), on its capture's connection.
final class WindowCensus {
    private let x: XConnection
    private(set) var windows: [TopLevelWindow] = []
    /// True when an event said the windows may have changed since the last `refresh()`.
    private(set) var isStale = true
    /// Bumped when a refresh finds a different set of windows, places or flags.
    private(set) var generation = 0

    private let wmState: xcb_atom_t
    private let netWMPID: xcb_atom_t
    private let protectedAtom: xcb_atom_t
    private let hasResource: Bool
    private let hasShape: Bool
    private var owners: [xcb_window_t: Int32] = [:]   // client → pid (a window's owner never changes)
    private var watched: Set<xcb_window_t> = []        // windows whose events we asked for

    init(x: XConnection) {
        self.x = x
        let connection = x.connection
        wmState = Self.atom("WM_STATE", connection)
        netWMPID = Self.atom("_NET_WM_PID", connection)
        protectedAtom = Self.atom("_OPENREPLAYKIT_PROTECTED", connection)
        hasResource = Self.hasExtension("X-Resource", connection)
        hasShape = Self.hasExtension("SHAPE", connection)
        if hasResource {
            free(xcb_res_query_version_reply(connection, xcb_res_query_version(connection, 1, 2), nil))
        }
        // Windows appearing, going, moving, restacking, being mapped or reparented.
        let mask: [UInt32] = [XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue]
        xcb_change_window_attributes(connection, x.root, XCB_CW_EVENT_MASK.rawValue, mask)
        xcb_flush(connection)
    }

    static func atom(_ name: String, _ connection: OpaquePointer) -> xcb_atom_t {
        let reply = xcb_intern_atom_reply(connection, xcb_intern_atom(connection, 0, UInt16(name.utf8.count), name), nil)
        defer { free(reply) }
        return reply?.pointee.atom ?? 0
    }

    static func hasExtension(_ name: String, _ connection: OpaquePointer) -> Bool {
        let reply = xcb_query_extension_reply(connection, xcb_query_extension(connection, UInt16(name.utf8.count), name), nil)
        defer { free(reply) }
        return reply?.pointee.present ?? 0 != 0
    }

    /// Looks at one event of the capture's connection; returns true when it concerned the windows.
    @discardableResult
    func note(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        switch Int32(event.pointee.response_type & 0x7f) {
        case XCB_CREATE_NOTIFY, XCB_DESTROY_NOTIFY, XCB_UNMAP_NOTIFY, XCB_MAP_NOTIFY, XCB_REPARENT_NOTIFY,
             XCB_CONFIGURE_NOTIFY, XCB_GRAVITY_NOTIFY, XCB_CIRCULATE_NOTIFY:
            isStale = true
            return true
        case XCB_PROPERTY_NOTIFY:
            let atom = UnsafeMutableRawPointer(event).assumingMemoryBound(to: xcb_property_notify_event_t.self).pointee.atom
            guard atom == protectedAtom || atom == XCB_ATOM_WM_CLASS.rawValue || atom == wmState || atom == netWMPID else { return false }
            isStale = true
            return true
        default:
            return false
        }
    }

    /// Asks the server for the windows again. Call with the server grabbed when what follows must
    /// agree with it (reading pixels).
    func refresh() {
        isStale = false
        let connection = x.connection
        guard let tree = xcb_query_tree_reply(connection, xcb_query_tree(connection, x.root), nil) else { return }
        let children = Array(UnsafeBufferPointer(start: xcb_query_tree_children(tree), count: Int(xcb_query_tree_children_length(tree))))
        free(tree)
        // Level 1: which children are viewable, and where.
        let attributeCookies = children.map { xcb_get_window_attributes(connection, $0) }
        let geometryCookies = children.map { xcb_get_geometry(connection, $0) }
        let stateCookies = children.map { xcb_get_property(connection, 0, $0, wmState, XCB_ATOM_ANY.rawValue, 0, 0) }
        var frames: [(window: xcb_window_t, outer: PixelRect, isClient: Bool)] = []
        for (index, window) in children.enumerated() {
            let attributes = xcb_get_window_attributes_reply(connection, attributeCookies[index], nil)
            let geometry = xcb_get_geometry_reply(connection, geometryCookies[index], nil)
            let state = xcb_get_property_reply(connection, stateCookies[index], nil)
            defer { free(attributes); free(geometry); free(state) }
            guard let attributes, let geometry,
                  attributes.pointee.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue),
                  attributes.pointee._class != UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue) else { continue }
            let border = Int(geometry.pointee.border_width)
            let outer = PixelRect(x: Int(geometry.pointee.x), y: Int(geometry.pointee.y),
                                  width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
            frames.append((window, outer, (state?.pointee.type ?? 0) != 0))
        }
        // Level 2: the client inside each frame (a window manager's frame holds it a level or two down).
        var clients: [xcb_window_t] = []
        for frame in frames {
            clients.append(frame.isClient ? frame.window : (findClient(below: frame.window, depth: 3) ?? frame.window))
            if !watched.contains(frame.window) {
                // A frame's own children: the client mapped, resized or reparented inside it.
                let mask: [UInt32] = [XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue | XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue]
                xcb_change_window_attributes(connection, frame.window, XCB_CW_EVENT_MASK.rawValue, mask)
                watched.insert(frame.window)
            }
        }
        for client in clients where !watched.contains(client) {
            // Its children too: a window mapped or reparented inside it.
            let mask: [UInt32] = [XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue | XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue]
            xcb_change_window_attributes(connection, client, XCB_CW_EVENT_MASK.rawValue, mask)
            watched.insert(client)
        }
        // Level 3: the clients' properties, places and owners.
        let classCookies = clients.map { xcb_get_property(connection, 0, $0, XCB_ATOM_WM_CLASS.rawValue, XCB_ATOM_STRING.rawValue, 0, 64) }
        let protectedCookies = clients.map { xcb_get_property(connection, 0, $0, protectedAtom, XCB_ATOM_CARDINAL.rawValue, 0, 1) }
        let geometryOfClients = clients.map { xcb_get_geometry(connection, $0) }
        let translateCookies = clients.map { xcb_translate_coordinates(connection, $0, x.root, 0, 0) }
        var found: [TopLevelWindow] = []
        for (index, client) in clients.enumerated() {
            let wmClass = propertyBytes(xcb_get_property_reply(connection, classCookies[index], nil))
            let protectedValue = propertyBytes(xcb_get_property_reply(connection, protectedCookies[index], nil))
            let geometry = xcb_get_geometry_reply(connection, geometryOfClients[index], nil)
            let translated = xcb_translate_coordinates_reply(connection, translateCookies[index], nil)
            defer { free(geometry); free(translated) }
            var clientRect = frames[index].outer
            var depth: UInt8 = 24
            var clientBorder = 0
            if let geometry, let translated {
                let border = Int(geometry.pointee.border_width)
                clientRect = PixelRect(x: Int(translated.pointee.dst_x) - border, y: Int(translated.pointee.dst_y) - border,
                                       width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
                depth = geometry.pointee.depth
                clientBorder = border
            }
            let instance = wmClass.split(separator: 0, omittingEmptySubsequences: false).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let isProtected = protectedValue.count >= 4 && protectedValue.withUnsafeBytes { $0.load(as: UInt32.self) } == 1
            found.append(TopLevelWindow(frame: frames[index].window, client: client, outer: frames[index].outer,
                                        clientRect: clientRect, clientDepth: depth, clientBorder: clientBorder, pid: nil, isProtected: isProtected,
                                        isSystemUI: Self.isSystemUI(instance: instance), shape: []))
        }
        resolveOwners(&found)
        for index in found.indices where found[index].isProtected {
            found[index].shape = boundingShape(of: found[index])
        }
        let innerWindows = findInnerWindows(of: found)
        watched.formIntersection(Set(found.map(\.frame) + found.map(\.client) + innerWindows.watched))
        for index in found.indices {
            found[index].inner = innerWindows.byClient[found[index].client, default: []].filter {
                $0.isProtected || $0.pid == nil || $0.pid != found[index].pid
            }
        }
        let live = Set(found.map(\.client) + innerWindows.watched)
        owners = owners.filter { live.contains($0.key) }
        if found != windows { generation += 1 }
        windows = found
    }

    /// Asks `window`'s client to draw all of it again: a synthetic Expose (a ClearArea would flash
    /// its background on the person's screen).
    func askToRedraw(_ window: xcb_window_t, width: Int, height: Int) {
        var event = xcb_expose_event_t()
        event.response_type = UInt8(XCB_EXPOSE)
        event.window = window
        event.width = UInt16(clamping: width)
        event.height = UInt16(clamping: height)
        withUnsafeBytes(of: &event) { bytes in
            var raw = [CChar](repeating: 0, count: 32)
            for i in 0..<min(32, bytes.count) { raw[i] = CChar(bitPattern: bytes[i]) }
            xcb_send_event(x.connection, 0, window, XCB_EVENT_MASK_EXPOSURE.rawValue, raw)
        }
    }

    /// WM_CLASS instances of OpenReplayKit's own windows (the consent prompt, the preview, the
    /// picker, the indicator): never in a captured frame.
    static func isSystemUI(instance: String) -> Bool {
        instance.hasPrefix("openreplaykit-") || instance == "replayd-indicator"
    }

    /// The first window with `WM_STATE` below `window`, breadth first (as `XmuClientWindow`).
    private func findClient(below window: xcb_window_t, depth: Int) -> xcb_window_t? {
        let connection = x.connection
        guard depth > 0, let tree = xcb_query_tree_reply(connection, xcb_query_tree(connection, window), nil) else { return nil }
        let children = Array(UnsafeBufferPointer(start: xcb_query_tree_children(tree), count: Int(xcb_query_tree_children_length(tree))))
        free(tree)
        let cookies = children.map { xcb_get_property(connection, 0, $0, wmState, XCB_ATOM_ANY.rawValue, 0, 0) }
        var hit: xcb_window_t?
        for (index, child) in children.enumerated() {
            let reply = xcb_get_property_reply(connection, cookies[index], nil)
            if hit == nil, let reply, reply.pointee.type != 0 { hit = child }
            free(reply)
        }
        if let hit { return hit }
        for child in children {
            if let deeper = findClient(below: child, depth: depth - 1) { return deeper }
        }
        return nil
    }

    /// The viewable windows below each client, a level at a time (one round trip per level, at most
    /// `depth` levels and `limit` windows in all: a deeper or larger tree is cut, and what is cut is
    /// not drawn into a frame by us but stays in the client's pixmap, hence the generous bounds).
    /// Each is watched for windows mapped or reparented inside it.
    private func findInnerWindows(of windows: [TopLevelWindow], depth: Int = 8, limit: Int = 512)
        -> (byClient: [xcb_window_t: [InnerWindow]], watched: [xcb_window_t]) {
        let connection = x.connection
        var byClient: [xcb_window_t: [InnerWindow]] = [:]
        var watchedNow: [xcb_window_t] = []
        var level: [(window: xcb_window_t, client: xcb_window_t)] = windows.map { ($0.client, $0.client) }
        var seen = 0
        for _ in 0..<depth where !level.isEmpty && seen < limit {
            let treeCookies = level.map { xcb_query_tree(connection, $0.window) }
            var children: [(window: xcb_window_t, client: xcb_window_t)] = []
            for (index, cookie) in treeCookies.enumerated() {
                guard let tree = xcb_query_tree_reply(connection, cookie, nil) else { continue }
                let ids = UnsafeBufferPointer(start: xcb_query_tree_children(tree), count: Int(xcb_query_tree_children_length(tree)))
                children += ids.prefix(max(0, limit - seen - children.count)).map { ($0, level[index].client) }
                free(tree)
            }
            seen += children.count
            let attributeCookies = children.map { xcb_get_window_attributes(connection, $0.window) }
            let geometryCookies = children.map { xcb_get_geometry(connection, $0.window) }
            let translateCookies = children.map { xcb_translate_coordinates(connection, $0.window, x.root, 0, 0) }
            let protectedCookies = children.map { xcb_get_property(connection, 0, $0.window, protectedAtom, XCB_ATOM_CARDINAL.rawValue, 0, 1) }
            var next: [(window: xcb_window_t, client: xcb_window_t)] = []
            var found: [(window: xcb_window_t, client: xcb_window_t, rect: PixelRect, isProtected: Bool)] = []
            for (index, child) in children.enumerated() {
                let attributes = xcb_get_window_attributes_reply(connection, attributeCookies[index], nil)
                let geometry = xcb_get_geometry_reply(connection, geometryCookies[index], nil)
                let translated = xcb_translate_coordinates_reply(connection, translateCookies[index], nil)
                let protectedValue = propertyBytes(xcb_get_property_reply(connection, protectedCookies[index], nil))
                defer { free(attributes); free(geometry); free(translated) }
                guard let attributes, let geometry, let translated,
                      attributes.pointee.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue),
                      attributes.pointee._class != UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue) else { continue }
                let border = Int(geometry.pointee.border_width)
                let rect = PixelRect(x: Int(translated.pointee.dst_x) - border, y: Int(translated.pointee.dst_y) - border,
                                     width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
                let isProtected = protectedValue.count >= 4 && protectedValue.withUnsafeBytes { $0.load(as: UInt32.self) } == 1
                found.append((child.window, child.client, rect, isProtected))
                next.append(child)
            }
            let pids = clientPIDs(of: found.map(\.window))
            for window in found {
                byClient[window.client, default: []].append(
                    InnerWindow(window: window.window, rect: window.rect, pid: pids[window.window], isProtected: window.isProtected))
                if !watched.contains(window.window) {
                    let mask: [UInt32] = [XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue | XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue]
                    xcb_change_window_attributes(connection, window.window, XCB_CW_EVENT_MASK.rawValue, mask)
                    watched.insert(window.window)
                }
                watchedNow.append(window.window)
            }
            level = next
        }
        return (byClient, watchedNow)
    }

    /// X-Resource's local client pid of each window (the kernel's word, through the X server), for
    /// those it can name; cached in `owners` (a window's owner never changes).
    private func clientPIDs(of windows: [xcb_window_t]) -> [xcb_window_t: Int32] {
        let connection = x.connection
        let unknown = windows.filter { owners[$0] == nil }
        if hasResource {
            let cookies = unknown.map { window in
                var spec = xcb_res_client_id_spec_t(client: window, mask: XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue)
                return xcb_res_query_client_ids(connection, 1, &spec)
            }
            for (window, cookie) in zip(unknown, cookies) {
                guard let reply = xcb_res_query_client_ids_reply(connection, cookie, nil) else { continue }
                defer { free(reply) }
                var iterator = xcb_res_query_client_ids_ids_iterator(reply)
                while iterator.rem > 0 {
                    if let value = iterator.data, value.pointee.spec.mask & XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue != 0,
                       xcb_res_client_id_value_value_length(value) >= 1, let pid = xcb_res_client_id_value_value(value) {
                        owners[window] = Int32(bitPattern: pid.pointee)
                    }
                    xcb_res_client_id_value_next(&iterator)
                }
            }
        }
        var pids: [xcb_window_t: Int32] = [:]
        for window in windows { if let pid = owners[window] { pids[window] = pid } }
        return pids
    }

    /// Who owns each client window: X-Resource's local client pid (the kernel's word, through the X
    /// server), else `_NET_WM_PID` (what the client says). Cached: a window's owner never changes.
    private func resolveOwners(_ windows: inout [TopLevelWindow]) {
        let connection = x.connection
        _ = clientPIDs(of: windows.map(\.client))
        let stillUnknown = windows.indices.filter { owners[windows[$0].client] == nil }
        let cookies = stillUnknown.map { xcb_get_property(connection, 0, windows[$0].client, netWMPID, XCB_ATOM_CARDINAL.rawValue, 0, 1) }
        for (index, cookie) in zip(stillUnknown, cookies) {
            let bytes = propertyBytes(xcb_get_property_reply(connection, cookie, nil))
            // Not cached: the client may set it later.
            if bytes.count >= 4 { windows[index].pid = Int32(bitPattern: bytes.withUnsafeBytes { $0.load(as: UInt32.self) }) }
        }
        for index in windows.indices {
            if let pid = owners[windows[index].client] { windows[index].pid = pid }
        }
    }

    /// A window's bounding shape in root coordinates; its rectangle when unshaped (or without SHAPE).
    private func boundingShape(of window: TopLevelWindow) -> [PixelRect] {
        guard hasShape else { return [window.clientRect] }
        let connection = x.connection
        guard let reply = xcb_shape_get_rectangles_reply(connection,
                                                         xcb_shape_get_rectangles(connection, window.client, UInt8(XCB_SHAPE_SK_BOUNDING.rawValue)), nil),
              let first = xcb_shape_get_rectangles_rectangles(reply) else { return [window.clientRect] }
        defer { free(reply) }
        let count = Int(xcb_shape_get_rectangles_rectangles_length(reply))
        // Shape rectangles are relative to the window's inside origin; clientRect includes the border.
        var inside = window.clientRect
        if let geometry = xcb_get_geometry_reply(connection, xcb_get_geometry(connection, window.client), nil) {
            let b = Int(geometry.pointee.border_width)
            inside = window.clientRect.offsetBy(dx: b, dy: b)
            free(geometry)
        }
        return UnsafeBufferPointer(start: first, count: count).map {
            PixelRect(x: inside.x + Int($0.x), y: inside.y + Int($0.y), width: Int($0.width), height: Int($0.height))
        }
    }

    private func propertyBytes(_ reply: UnsafeMutablePointer<xcb_get_property_reply_t>?) -> [UInt8] {
        guard let reply else { return [] }
        defer { free(reply) }
        let length = Int(xcb_get_property_value_length(reply))
        guard length > 0, let value = xcb_get_property_value(reply) else { return [] }
        return Array(UnsafeRawBufferPointer(start: value, count: length))
    }
}

/// The processes of one application: a process and every process below it, from `/proc/PID/stat`
/// (the parent pid after the command's closing parenthesis).
package enum ProcessTree {
    package static func members(rootedAt root: Int32) -> Set<Int32> {
        var children: [Int32: [Int32]] = [:]
        guard let directory = opendir("/proc") else { return [root] }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = Int32(name), let parent = parentOf(pid) else { continue }
            children[parent, default: []].append(pid)
        }
        var members: Set<Int32> = [root]
        var queue = [root]
        while let next = queue.popLast() {
            for child in children[next] ?? [] where members.insert(child).inserted { queue.append(child) }
        }
        return members
    }

    static func parentOf(_ pid: Int32) -> Int32? {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0, let paren = buffer[0..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // ") S PPID ..."
        let fields = buffer[(paren + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2 else { return nil }
        return Int32(String(decoding: fields[1], as: UTF8.self))
    }
}
