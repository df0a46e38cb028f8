import Foundation

/// A bounded FIFO between two dedicated threads (capture → encoder, ingest → RTMP relay). `push`
/// never blocks: when the queue is full it refuses, and the producer decides (the capture counts a
/// dropped frame; the relay gives up). `pop` blocks until an element arrives or the queue is closed
/// and empty. Ordered: one consumer loop per stream.
package final class BoundedQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var closed = false
    }

    package let capacity: Int
    private let condition = NSCondition()
    nonisolated(unsafe) private var state = State()   // guarded by `condition`

    package init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Appends `element`; false (and nothing changes) when full or closed.
    package func push(_ element: Element) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !state.closed, state.items.count < capacity else { return false }
        state.items.append(element)
        condition.signal()
        return true
    }

    /// The oldest element; nil once the queue is closed and drained.
    package func pop() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        while state.items.isEmpty && !state.closed { condition.wait() }
        return state.items.isEmpty ? nil : state.items.removeFirst()
    }

    /// True once `close` was called.
    package var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state.closed
    }

    /// The oldest element, or nil at once when there is none.
    package func tryPop() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        return state.items.isEmpty ? nil : state.items.removeFirst()
    }

    /// No more pushes; `pop` drains what is left (or nothing, with `discardingWhatIsLeft`), then returns nil.
    package func close(discardingWhatIsLeft: Bool = false) {
        condition.lock()
        state.closed = true
        if discardingWhatIsLeft { state.items.removeAll() }
        condition.broadcast()
        condition.unlock()
    }
}
