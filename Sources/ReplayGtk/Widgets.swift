import CGtk
import CGtkShim

/// One GTK widget. The Swift object holds one reference to it (taken at creation, the floating
/// one sunk) and gives it back when it goes; the widget tree holds its own references.
@MainActor
public class Widget {
    /// The `GtkWidget *`.
    let object: UnsafeMutableRawPointer
    var widget: UnsafeMutablePointer<GtkWidget> { object.assumingMemoryBound(to: GtkWidget.self) }

    init(_ created: UnsafeMutablePointer<GtkWidget>) {
        object = UnsafeMutableRawPointer(created)
        g_object_ref_sink(object)
    }

    isolated deinit { g_object_unref(object) }

    public func setMargins(_ margin: Int32) {
        gtk_widget_set_margin_top(widget, margin)
        gtk_widget_set_margin_bottom(widget, margin)
        gtk_widget_set_margin_start(widget, margin)
        gtk_widget_set_margin_end(widget, margin)
    }

    public func expand(horizontally: Bool = false, vertically: Bool = false) {
        gtk_widget_set_hexpand(widget, horizontally ? 1 : 0)
        gtk_widget_set_vexpand(widget, vertically ? 1 : 0)
    }

    public enum Alignment: Sendable { case fill, start, end, center }
    public func align(horizontal: Alignment? = nil, vertical: Alignment? = nil) {
        func gtk(_ a: Alignment) -> GtkAlign {
            switch a { case .fill: GTK_ALIGN_FILL; case .start: GTK_ALIGN_START; case .end: GTK_ALIGN_END; case .center: GTK_ALIGN_CENTER }
        }
        if let horizontal { gtk_widget_set_halign(widget, gtk(horizontal)) }
        if let vertical { gtk_widget_set_valign(widget, gtk(vertical)) }
    }

    public func setSize(width: Int32, height: Int32) { gtk_widget_set_size_request(widget, width, height) }

    /// Adds a style class (`"suggested-action"`, `"title-2"`, `"dim-label"`, …).
    public func addStyleClass(_ name: String) { gtk_widget_add_css_class(widget, name) }

    public var isSensitive: Bool {
        get { gtk_widget_get_sensitive(widget) != 0 }
        set { gtk_widget_set_sensitive(widget, newValue ? 1 : 0) }
    }

    public func grabFocus() { _ = gtk_widget_grab_focus(widget) }

    public var hasFocus: Bool { gtk_widget_has_focus(widget) != 0 }

    public func setTooltip(_ text: String) { gtk_widget_set_tooltip_text(widget, text) }

    /// Calls `handler` for keys pressed while this widget or one inside it has the focus. In the
    /// capture phase (`beforeChildren`), this widget sees a key before the focused child does, so
    /// that a window's Return and Escape work whichever button has the focus.
    public func onKeyPress(beforeChildren: Bool = true, _ handler: @escaping @MainActor (Key, KeyModifiers) -> Bool) {
        guard let controller = gtk_event_controller_key_new() else { return }
        gtk_event_controller_set_propagation_phase(controller, beforeChildren ? GTK_PHASE_CAPTURE : GTK_PHASE_BUBBLE)
        connectKey(UnsafeMutableRawPointer(controller), handler)
        gtk_widget_add_controller(widget, controller) // takes the controller's reference
    }
}

/// A top-level window.
@MainActor
public final class Window: Widget {
    private var child: Widget?

    public init(title: String, width: Int32 = -1, height: Int32 = -1) {
        super.init(gtk_window_new())
        gtk_window_set_title(window, title)
        gtk_window_set_default_size(window, width, height)
    }

    var window: UnsafeMutablePointer<GtkWindow> { object.assumingMemoryBound(to: GtkWindow.self) }

    public func setChild(_ child: Widget) {
        self.child = child
        gtk_window_set_child(window, child.widget)
    }

    public var isResizable: Bool {
        get { gtk_window_get_resizable(window) != 0 }
        set { gtk_window_set_resizable(window, newValue ? 1 : 0) }
    }

    /// The widget Return activates when no other widget takes it.
    public func setDefaultWidget(_ widget: Widget) { gtk_window_set_default_widget(window, widget.widget) }

    /// The widget that has the focus when the window is shown.
    public func setFocus(_ widget: Widget) { gtk_window_set_focus(window, widget.widget) }

    /// Shows the window, raised and with the keyboard focus (as the window manager allows).
    public func present() { gtk_window_present(window) }

    /// Closes the window for good.
    public func destroy() { gtk_window_destroy(window) }

    /// Called when the person closes the window (its close button, the window manager's
    /// WM_DELETE_WINDOW); return true to keep it open.
    public func onCloseRequest(_ handler: @escaping @MainActor () -> Bool) {
        connectBool(object, "close-request", handler)
    }

    /// Called once the window is on the screen.
    public func onMap(_ handler: @escaping @MainActor () -> Void) { connect(object, "map", handler) }

    /// On X11: asks the window manager to keep the window above the others, as a dialog.
    @discardableResult
    public func keepAbove() -> Bool {
        guard let surface = gtk_native_get_surface(OpaquePointer(object)) else { return false }
        return ork_gtk_x11_keep_above(surface) != 0
    }

    /// For a system window: above the others once on the screen, and again (above and focused)
    /// once the window manager manages it.
    public func staysAboveOnceMapped() {
        onMap { [weak self] in
            guard let self else { return }
            self.keepAbove()
            Gtk.after(milliseconds: 250) { [weak self] in
                self?.keepAbove()
                self?.present()
            }
        }
    }

    /// The X11 window id, 0 before the window is realized or when not on X11.
    public var x11WindowID: UInt {
        guard let surface = gtk_native_get_surface(OpaquePointer(object)) else { return 0 }
        return UInt(ork_gtk_x11_xid(surface))
    }
}

/// A row or column of widgets.
@MainActor
public final class Box: Widget {
    public enum Orientation: Sendable { case horizontal, vertical }
    private var children: [Widget] = []

    public init(_ orientation: Orientation, spacing: Int32 = 0) {
        super.init(gtk_box_new(orientation == .horizontal ? GTK_ORIENTATION_HORIZONTAL : GTK_ORIENTATION_VERTICAL, spacing))
    }

    public func append(_ child: Widget) {
        children.append(child)
        gtk_box_append(object.assumingMemoryBound(to: GtkBox.self), child.widget)
    }

    /// Makes every child the same size.
    public var isHomogeneous: Bool {
        get { gtk_box_get_homogeneous(object.assumingMemoryBound(to: GtkBox.self)) != 0 }
        set { gtk_box_set_homogeneous(object.assumingMemoryBound(to: GtkBox.self), newValue ? 1 : 0) }
    }
}

/// Text.
@MainActor
public final class Label: Widget {
    public init(_ text: String = "", wraps: Bool = false) {
        super.init(gtk_label_new(text))
        if wraps {
            gtk_label_set_wrap(OpaquePointer(object), 1)
            gtk_label_set_max_width_chars(OpaquePointer(object), 44)
        }
    }

    public var text: String {
        get { String(cString: gtk_label_get_text(OpaquePointer(object))) }
        set { gtk_label_set_text(OpaquePointer(object), newValue) }
    }

    public enum Justification: Sendable { case left, center, right }
    public func justify(_ justification: Justification) {
        let (mode, x): (GtkJustification, Float) = switch justification {
        case .left: (GTK_JUSTIFY_LEFT, 0)
        case .center: (GTK_JUSTIFY_CENTER, 0.5)
        case .right: (GTK_JUSTIFY_RIGHT, 1)
        }
        gtk_label_set_justify(OpaquePointer(object), mode)
        gtk_label_set_xalign(OpaquePointer(object), x)
    }

    /// Digits of one width, for times that change while shown.
    public func useTabularDigits() { addStyleClass("numeric") }
}

/// A push button.
@MainActor
public final class Button: Widget {
    public init(_ label: String, mnemonic: Bool = false) {
        super.init(mnemonic ? gtk_button_new_with_mnemonic(label) : gtk_button_new_with_label(label))
    }

    public var label: String {
        get { gtk_button_get_label(object.assumingMemoryBound(to: GtkButton.self)).map { String(cString: $0) } ?? "" }
        set { gtk_button_set_label(object.assumingMemoryBound(to: GtkButton.self), newValue) }
    }

    public func onClick(_ handler: @escaping @MainActor () -> Void) { connect(object, "clicked", handler) }
}

/// A picture from a file, or a named icon.
@MainActor
public final class Image: Widget {
    public init(file: String, pixelSize: Int32) {
        super.init(gtk_image_new_from_file(file))
        gtk_image_set_pixel_size(OpaquePointer(object), pixelSize)
    }

    public init(iconName: String, pixelSize: Int32) {
        super.init(gtk_image_new_from_icon_name(iconName))
        gtk_image_set_pixel_size(OpaquePointer(object), pixelSize)
    }
}

/// A horizontal slider over a range of values, moved by dragging or by the arrow keys.
@MainActor
public final class Scale: Widget {
    public init(from minimum: Double, to maximum: Double, step: Double) {
        super.init(gtk_scale_new_with_range(GTK_ORIENTATION_HORIZONTAL, minimum, max(maximum, minimum + step), step))
        gtk_scale_set_draw_value(scale, 0)
        gtk_range_set_increments(range, step, step * 10)
    }

    var range: UnsafeMutablePointer<GtkRange> { object.assumingMemoryBound(to: GtkRange.self) }
    var scale: UnsafeMutablePointer<GtkScale> { object.assumingMemoryBound(to: GtkScale.self) }

    public var value: Double {
        get { gtk_range_get_value(range) }
        set { gtk_range_set_value(range, newValue) }
    }

    /// Limits the value to `lower...upper` (within the scale's range).
    public func restrict(to upper: Double) {
        gtk_range_set_restrict_to_fill_level(range, 1)
        gtk_range_set_fill_level(range, upper)
    }

    /// Draws the part of the trough below the value highlighted, or not.
    public var highlightsOrigin: Bool {
        get { gtk_scale_get_has_origin(scale) != 0 }
        set { gtk_scale_set_has_origin(scale, newValue ? 1 : 0) }
    }

    /// Draws the trough the other way round (the highlight from the value to the end).
    public var isInverted: Bool {
        get { gtk_range_get_inverted(range) != 0 }
        set { gtk_range_set_inverted(range, newValue ? 1 : 0) }
    }

    /// A tick under the trough at `value`, with an optional label.
    public func addMark(at value: Double, label: String? = nil) {
        gtk_scale_add_mark(scale, value, GTK_POS_BOTTOM, label)
    }

    public func clearMarks() { gtk_scale_clear_marks(scale) }

    /// Any change of the value, by the person or the program.
    public func onValueChanged(_ handler: @escaping @MainActor () -> Void) { connect(object, "value-changed", handler) }

    /// The person asks for `value` (dragging, a click, a key): return true to refuse or handle it yourself.
    public func onChangeByPerson(_ handler: @escaping @MainActor (Double) -> Bool) { connectChangeValue(object, handler) }
}
