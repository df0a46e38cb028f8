/// A completion or sample handler as ReplayKit types it, not `@Sendable`, carried to the library's
/// task or thread that calls it.
///
/// `@unchecked Sendable`: the caller hands the closure over and the library calls it from one task
/// (a completion, once) or one delivery thread (samples, in order), as ReplayKit calls its handlers
/// on a queue of its own; what the closure touches is the app's concern there, as on iOS.
struct HandedOver<Value>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
