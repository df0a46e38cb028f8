/// A delegate as ReplayKit keeps one: weakly, and called from the library's own threads.
///
/// `@unchecked Sendable`: iOS's delegate protocols ask nothing of a delegate's isolation (they are
/// Objective-C protocols), and real conformances are non-final, non-`Sendable` classes. So the library
/// only passes the reference between its threads and calls it, as ReplayKit does; what the delegate
/// does on the calling thread is the app's concern, as on iOS (the protocols' docs say which thread).
/// Typed by the caller (`value as? any P`): a protocol existential cannot be a generic argument
/// constrained to `AnyObject`.
struct WeakDelegate: @unchecked Sendable {
    weak var value: AnyObject?

    init(_ value: AnyObject? = nil) {
        self.value = value
    }
}
