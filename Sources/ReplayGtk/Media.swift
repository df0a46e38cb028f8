import CGtk

/// A movie file played by GTK's media backend (GStreamer: picture and sound). Show it in a `Picture`.
@MainActor
public final class MediaFile {
    /// The `GtkMediaStream *`, ours.
    let object: UnsafeMutableRawPointer
    var stream: UnsafeMutablePointer<GtkMediaStream> { object.assumingMemoryBound(to: GtkMediaStream.self) }

    public init(path: String) {
        object = UnsafeMutableRawPointer(gtk_media_file_new_for_filename(path))
    }

    isolated deinit {
        gtk_media_stream_pause(stream)
        g_object_unref(object)
    }

    public func play() { gtk_media_stream_play(stream) }
    public func pause() { gtk_media_stream_pause(stream) }
    public var isPlaying: Bool { gtk_media_stream_get_playing(stream) != 0 }
    public var hasEnded: Bool { gtk_media_stream_get_ended(stream) != 0 }
    /// Whether the backend knows the movie (its duration) yet.
    public var isPrepared: Bool { gtk_media_stream_is_prepared(stream) != 0 }

    /// The movie's length in seconds (0 until prepared).
    public var duration: Double { Double(gtk_media_stream_get_duration(stream)) / 1_000_000 }
    /// Where playback is, in seconds.
    public var position: Double { Double(gtk_media_stream_get_timestamp(stream)) / 1_000_000 }

    public func seek(to seconds: Double) {
        guard gtk_media_stream_is_seekable(stream) != 0 else { return }
        gtk_media_stream_seek(stream, gint64(seconds * 1_000_000))
    }

    /// The backend's error, if it failed (no codec, unreadable file).
    public var errorMessage: String? {
        guard let error = gtk_media_stream_get_error(stream) else { return nil }
        return String(cString: error.pointee.message)
    }

    /// Called when a property changes: "timestamp", "prepared", "playing", "ended", "error".
    public func onChange(of property: String, _ handler: @escaping @MainActor () -> Void) {
        connectNotify(object, property: property, handler)
    }
}

/// Shows a picture that changes: a playing `MediaFile`, scaled to fit and centered.
@MainActor
public final class Picture: Widget {
    private let media: MediaFile

    public init(media: MediaFile) {
        self.media = media
        super.init(gtk_picture_new_for_paintable(OpaquePointer(media.object)))
        gtk_picture_set_can_shrink(OpaquePointer(object), 1)
    }
}

/// The file chooser that saves: asks the person for a file name and folder.
@MainActor
public final class SaveFileDialog {
    /// The `GtkFileChooserNative *`, ours.
    private let object: UnsafeMutableRawPointer

    public init(title: String, parent: Window, acceptLabel: String = "_Save", suggestedName: String, folder: String? = nil) {
        object = UnsafeMutableRawPointer(gtk_file_chooser_native_new(title, parent.window, GTK_FILE_CHOOSER_ACTION_SAVE, acceptLabel, "_Cancel"))
        gtk_native_dialog_set_modal(object.assumingMemoryBound(to: GtkNativeDialog.self), 1)
        gtk_file_chooser_set_current_name(OpaquePointer(object), suggestedName)
        if let folder, let file = g_file_new_for_path(folder) {
            gtk_file_chooser_set_current_folder(OpaquePointer(object), file, nil)
            g_object_unref(UnsafeMutableRawPointer(file))
        }
    }

    isolated deinit { g_object_unref(object) }

    /// Shows the chooser; `completion` gets the chosen path, or nil when the person cancelled.
    public func show(_ completion: @escaping @MainActor (String?) -> Void) {
        connectResponse(object) { [object] response in
            var path: String?
            if response == GTK_RESPONSE_ACCEPT.rawValue, let file = gtk_file_chooser_get_file(OpaquePointer(object)) {
                if let chosen = g_file_get_path(file) {
                    path = String(cString: chosen)
                    g_free(chosen)
                }
                g_object_unref(UnsafeMutableRawPointer(file))
            }
            completion(path)
        }
        gtk_native_dialog_show(object.assumingMemoryBound(to: GtkNativeDialog.self))
    }
}
