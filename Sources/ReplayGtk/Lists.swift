import CGtk

/// A vertical list of rows, one of which is selected (GtkListBox in single selection). The program
/// moves the selection itself (`select(at:)`), so that a window's Up and Down keys move it wherever
/// the keyboard focus is; a click on a row selects it.
@MainActor
public final class ListBox: Widget {
    private var rows: [ListBoxRow] = []

    public init() {
        super.init(gtk_list_box_new())
        gtk_list_box_set_selection_mode(list, GTK_SELECTION_SINGLE)
        // A click selects; activating (double click) is left to the window's Return.
        gtk_list_box_set_activate_on_single_click(list, 0)
    }

    /// `GtkListBox` is opaque to Swift (its struct is private to GTK).
    var list: OpaquePointer { OpaquePointer(object) }

    /// Adds a row holding `child` at the end.
    @discardableResult
    public func append(_ child: Widget) -> ListBoxRow {
        let row = ListBoxRow(child)
        rows.append(row)
        gtk_list_box_append(list, row.widget)
        return row
    }

    public var count: Int { rows.count }

    /// The selected row's index, nil when none is.
    public var selectedIndex: Int? {
        guard let row = gtk_list_box_get_selected_row(list) else { return nil }
        let index = Int(gtk_list_box_row_get_index(row))
        return index >= 0 ? index : nil
    }

    /// Selects the row at `index` (clamped to the rows there are) and scrolls it into view.
    public func select(at index: Int) {
        guard !rows.isEmpty else { return }
        let row = rows[min(max(0, index), rows.count - 1)]
        gtk_list_box_select_row(list, row.object.assumingMemoryBound(to: GtkListBoxRow.self))
    }

    public func row(at index: Int) -> ListBoxRow? { rows.indices.contains(index) ? rows[index] : nil }
}

/// One row of a `ListBox`.
@MainActor
public final class ListBoxRow: Widget {
    private let child: Widget

    init(_ child: Widget) {
        self.child = child
        super.init(gtk_list_box_row_new())
        gtk_list_box_row_set_child(object.assumingMemoryBound(to: GtkListBoxRow.self), child.widget)
    }
}

/// Shows its child in a scrollable area, as tall as the child up to `maximumHeight`.
@MainActor
public final class ScrolledWindow: Widget {
    private let child: Widget

    public init(_ child: Widget, maximumHeight: Int32) {
        self.child = child
        super.init(gtk_scrolled_window_new())
        let scrolled = OpaquePointer(object)
        gtk_scrolled_window_set_child(scrolled, child.widget)
        gtk_scrolled_window_set_policy(scrolled, GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC)
        gtk_scrolled_window_set_propagate_natural_height(scrolled, 1)
        gtk_scrolled_window_set_max_content_height(scrolled, maximumHeight)
    }
}
