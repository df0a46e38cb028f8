import CGtk
import CGtkShim

// Swift closures travel through GTK's `gpointer user_data` as retained boxes, one class per
// handler shape; GTK releases a box (its GClosureNotify / GDestroyNotify) when the handler or
// source goes. The trampolines run on GTK's main thread, which is the main actor.

final class VoidCallback {
    let call: @MainActor () -> Void
    init(_ call: @escaping @MainActor () -> Void) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> VoidCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

final class BoolCallback {
    let call: @MainActor () -> Bool
    init(_ call: @escaping @MainActor () -> Bool) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> BoolCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

final class KeyCallback {
    let call: @MainActor (Key, KeyModifiers) -> Bool
    init(_ call: @escaping @MainActor (Key, KeyModifiers) -> Bool) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> KeyCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

final class IntCallback {
    let call: @MainActor (Int32) -> Void
    init(_ call: @escaping @MainActor (Int32) -> Void) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> IntCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

final class DoubleCallback {
    let call: @MainActor (Double) -> Bool
    init(_ call: @escaping @MainActor (Double) -> Bool) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> DoubleCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

final class PointCallback {
    let call: @MainActor (Double, Double) -> Void
    init(_ call: @escaping @MainActor (Double, Double) -> Void) { self.call = call }
    static func from(_ data: UnsafeMutableRawPointer?) -> PointCallback { Unmanaged.fromOpaque(data!).takeUnretainedValue() }
}

/// Releases a box passed retained as a handler's data (GClosureNotify).
let releaseClosureData: GClosureNotify = { data, _ in
    if let data { Unmanaged<AnyObject>.fromOpaque(data).release() }
}

/// Releases a box passed retained as a source's data (GDestroyNotify).
let releaseCallback: GDestroyNotify = { data in
    if let data { Unmanaged<AnyObject>.fromOpaque(data).release() }
}

/// Connects `handler` to `signal` of the GObject `instance` ("clicked", "map", "value-changed").
@MainActor @discardableResult
func connect(_ instance: UnsafeMutableRawPointer, _ signal: String, _ handler: @escaping @MainActor () -> Void) -> UInt {
    let box = Unmanaged.passRetained(VoidCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_void(instance, signal, { _, data in
        MainActor.assumeIsolated { VoidCallback.from(data).call() }
    }, box, releaseClosureData))
}

/// Connects `handler` to a property's change: `notify::NAME`.
@MainActor @discardableResult
func connectNotify(_ instance: UnsafeMutableRawPointer, property: String, _ handler: @escaping @MainActor () -> Void) -> UInt {
    let box = Unmanaged.passRetained(VoidCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_notify(instance, "notify::\(property)", { _, _, data in
        MainActor.assumeIsolated { VoidCallback.from(data).call() }
    }, box, releaseClosureData))
}

/// Connects a handler that answers whether it handled the signal ("close-request").
@MainActor @discardableResult
func connectBool(_ instance: UnsafeMutableRawPointer, _ signal: String, _ handler: @escaping @MainActor () -> Bool) -> UInt {
    let box = Unmanaged.passRetained(BoolCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_bool(instance, signal, { _, data in
        MainActor.assumeIsolated { BoolCallback.from(data).call() } ? 1 : 0
    }, box, releaseClosureData))
}

/// Connects a GtkEventControllerKey's "key-pressed".
@MainActor @discardableResult
func connectKey(_ controller: UnsafeMutableRawPointer, _ handler: @escaping @MainActor (Key, KeyModifiers) -> Bool) -> UInt {
    let box = Unmanaged.passRetained(KeyCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_key(controller, "key-pressed", { _, keyval, _, state, data in
        MainActor.assumeIsolated {
            KeyCallback.from(data).call(Key(keyval), KeyModifiers(rawValue: state.rawValue))
        } ? 1 : 0
    }, box, releaseClosureData))
}

/// Connects a GtkNativeDialog's "response".
@MainActor @discardableResult
func connectResponse(_ dialog: UnsafeMutableRawPointer, _ handler: @escaping @MainActor (Int32) -> Void) -> UInt {
    let box = Unmanaged.passRetained(IntCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_response(dialog, "response", { _, response, data in
        MainActor.assumeIsolated { IntCallback.from(data).call(response) }
    }, box, releaseClosureData))
}

/// Connects a GtkRange's "change-value" (only the person's changes, not the program's).
@MainActor @discardableResult
func connectChangeValue(_ range: UnsafeMutableRawPointer, _ handler: @escaping @MainActor (Double) -> Bool) -> UInt {
    let box = Unmanaged.passRetained(DoubleCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_change_value(range, "change-value", { _, _, value, data in
        MainActor.assumeIsolated { DoubleCallback.from(data).call(value) } ? 1 : 0
    }, box, releaseClosureData))
}

/// Connects a handler of a point or offset ("drag-begin", "drag-update", "drag-end").
@MainActor @discardableResult
func connectPoint(_ instance: UnsafeMutableRawPointer, _ signal: String, _ handler: @escaping @MainActor (Double, Double) -> Void) -> UInt {
    let box = Unmanaged.passRetained(PointCallback(handler)).toOpaque()
    return UInt(ork_gtk_connect_point(instance, signal, { _, x, y, data in
        MainActor.assumeIsolated { PointCallback.from(data).call(x, y) }
    }, box, releaseClosureData))
}
