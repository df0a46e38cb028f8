import CGtk

/// A widget the app paints itself, with cairo, and that follows mouse drags: a canvas.
@MainActor
public final class DrawingArea: Widget {
    private final class Painter {
        let paint: @MainActor (Canvas, Int, Int) -> Void
        init(_ paint: @escaping @MainActor (Canvas, Int, Int) -> Void) { self.paint = paint }
    }

    public init(width: Int32, height: Int32, paint: @escaping @MainActor (Canvas, Int, Int) -> Void) {
        super.init(gtk_drawing_area_new())
        let area = object.assumingMemoryBound(to: GtkDrawingArea.self)
        gtk_drawing_area_set_content_width(area, width)
        gtk_drawing_area_set_content_height(area, height)
        let box = Unmanaged.passRetained(Painter(paint)).toOpaque()
        gtk_drawing_area_set_draw_func(area, { _, cairo, width, height, data in
            guard let cairo, let data else { return }
            MainActor.assumeIsolated {
                Unmanaged<Painter>.fromOpaque(data).takeUnretainedValue().paint(Canvas(cairo), Int(width), Int(height))
            }
        }, box, releaseCallback)
    }

    /// Paints again (soon, at the next frame).
    public func redraw() { gtk_widget_queue_draw(widget) }

    /// Follows a drag with the primary button: `began` at the press (in the widget's coordinates),
    /// `moved` with each new point, `ended` at the release.
    public func onDrag(began: @escaping @MainActor (Double, Double) -> Void,
                       moved: @escaping @MainActor (Double, Double) -> Void,
                       ended: @escaping @MainActor () -> Void) {
        guard let gesture = gtk_gesture_drag_new() else { return }
        let raw = UnsafeMutableRawPointer(gesture)
        var start = (0.0, 0.0)
        connectPoint(raw, "drag-begin") { x, y in start = (x, y); began(x, y) }
        connectPoint(raw, "drag-update") { dx, dy in moved(start.0 + dx, start.1 + dy) }
        connectPoint(raw, "drag-end") { _, _ in ended() }
        gtk_widget_add_controller(widget, gesture)
    }
}

/// The cairo context a `DrawingArea` paints with, for the length of one paint.
@MainActor
public struct Canvas {
    private let cairo: OpaquePointer
    init(_ cairo: OpaquePointer) { self.cairo = cairo }

    /// Colour components from 0 to 1.
    public func setColor(red: Double, green: Double, blue: Double, alpha: Double = 1) {
        cairo_set_source_rgba(cairo, red, green, blue, alpha)
    }
    public func fill(x: Double, y: Double, width: Double, height: Double) {
        cairo_rectangle(cairo, x, y, width, height)
        cairo_fill(cairo)
    }
    public func fillAll() { cairo_paint(cairo) }
    /// Strokes a polyline through `points` with round joins.
    public func stroke(_ points: [(x: Double, y: Double)], width: Double) {
        guard let first = points.first else { return }
        cairo_set_line_width(cairo, width)
        cairo_set_line_cap(cairo, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(cairo, CAIRO_LINE_JOIN_ROUND)
        cairo_move_to(cairo, first.x, first.y)
        for point in points.dropFirst() { cairo_line_to(cairo, point.x, point.y) }
        if points.count == 1 { cairo_line_to(cairo, first.x, first.y) }
        cairo_stroke(cairo)
    }
}

/// A check box with a label.
@MainActor
public final class CheckButton: Widget {
    public init(_ label: String) { super.init(gtk_check_button_new_with_label(label)) }

    public var isActive: Bool {
        get { gtk_check_button_get_active(object.assumingMemoryBound(to: GtkCheckButton.self)) != 0 }
        set { gtk_check_button_set_active(object.assumingMemoryBound(to: GtkCheckButton.self), newValue ? 1 : 0) }
    }

    public func onToggle(_ handler: @escaping @MainActor () -> Void) { connect(object, "toggled", handler) }
}

/// A level meter: a bar filled from 0 to `value` of `maximum` (sound levels, progress).
@MainActor
public final class LevelBar: Widget {
    public init(maximum: Double = 1) {
        super.init(gtk_level_bar_new_for_interval(0, maximum))
    }

    public var value: Double {
        get { gtk_level_bar_get_value(OpaquePointer(object)) }
        set { gtk_level_bar_set_value(OpaquePointer(object), newValue) }
    }
}
