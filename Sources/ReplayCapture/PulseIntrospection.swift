import CPulse
import ReplayMedia

/// One-off questions to the PulseAudio server, on the calling (dedicated) thread: each connects,
/// asks, and disconnects, waiting a second at most (a server that does not answer gives nil).
package enum PulseIntrospection {
    private final class Answer<Value> {
        var value: Value?
        var done = false
    }

    /// The name of the default source when it is a sink's monitor (what the computer plays, which
    /// PulseAudio makes the default where no microphone is plugged in); nil for a real source, or
    /// when the server cannot say.
    package static func defaultSourceIfMonitor(server: String? = nil) -> String? {
        ask(server: server) { context, answer in
            pa_context_get_source_info_by_name(context, "@DEFAULT_SOURCE@", { _, info, eol, userdata in
                let answer = Unmanaged<Answer<String>>.fromOpaque(userdata!).takeUnretainedValue()
                if eol != 0 {
                    answer.done = true
                } else if let info, info.pointee.monitor_of_sink != UInt32.max /* PA_INVALID_INDEX */, let name = info.pointee.name {
                    answer.value = String(cString: name)
                }
            }, answer)
        }
    }

    /// Connects, starts one query (`start` hands PulseAudio the answer box as its userdata), runs
    /// the main loop until the query's callback marks the answer done, and disconnects.
    private static func ask<Value>(
        server: String? = nil, _ start: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?
    ) -> Value? {
        guard let loop = pa_mainloop_new() else { return nil }
        defer { pa_mainloop_free(loop) }
        guard let context = pa_context_new(pa_mainloop_get_api(loop), "replayd-introspection") else { return nil }
        defer {
            pa_context_disconnect(context)
            pa_context_unref(context)
        }
        guard pa_context_connect(context, server, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else { return nil }
        // At most a second in all: a server that does not answer (stalled, or gone without closing
        // the socket) must not hold the caller (a sound source's reading thread, which a recording's
        // stop waits for). `pa_mainloop_iterate` blocking would wait for it for ever.
        let deadline = MonotonicClock.now() + 1_000_000_000
        while pa_context_get_state(context) != PA_CONTEXT_READY {
            let state = pa_context_get_state(context)
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED || !iterate(loop, until: deadline) { return nil }
        }
        let answer = Answer<Value>()
        let box = Unmanaged.passRetained(answer)
        defer { box.release() }
        guard let operation = start(context, box.toOpaque()) else { return nil }
        defer { pa_operation_unref(operation) }
        while !answer.done, iterate(loop, until: deadline) {}
        return answer.value
    }

    /// One round of the main loop, waiting for an event at most until `deadline` (monotonic ns);
    /// false once the deadline has passed.
    private static func iterate(_ loop: OpaquePointer, until deadline: Int64) -> Bool {
        let left = deadline - MonotonicClock.now()
        guard left > 0, pa_mainloop_prepare(loop, Int32(min(left / 1_000, Int64(Int32.max)))) >= 0 else { return false }
        guard pa_mainloop_poll(loop) >= 0, pa_mainloop_dispatch(loop) >= 0 else { return false }
        return true
    }
}
