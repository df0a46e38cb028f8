import CGtk

/// A one-line text field (GtkEntry): a server address, a stream key (`isSecret` shows dots).
@MainActor
public final class Entry: Widget {
    public init(text: String = "", placeholder: String? = nil) {
        super.init(gtk_entry_new())
        self.text = text
        if let placeholder { gtk_entry_set_placeholder_text(entry, placeholder) }
    }

    /// `GtkEntry` and the `GtkEditable` interface it implements.
    var entry: UnsafeMutablePointer<GtkEntry> { object.assumingMemoryBound(to: GtkEntry.self) }
    var editable: OpaquePointer { OpaquePointer(object) }

    public var text: String {
        get { gtk_editable_get_text(editable).map { String(cString: $0) } ?? "" }
        set { gtk_editable_set_text(editable, newValue) }
    }

    /// Shows dots instead of the text (a password, a key).
    public var isSecret: Bool {
        get { gtk_entry_get_visibility(entry) == 0 }
        set { gtk_entry_set_visibility(entry, newValue ? 0 : 1) }
    }

    /// Return in the field activates the window's default widget.
    public var activatesDefault: Bool {
        get { gtk_entry_get_activates_default(entry) != 0 }
        set { gtk_entry_set_activates_default(entry, newValue ? 1 : 0) }
    }

    /// Each change of the text, by the person or the program.
    public func onChange(_ handler: @escaping @MainActor () -> Void) { connect(object, "changed", handler) }
}
