import CPulse

/// One-off questions to the PulseAudio server, on the calling (dedicated) thread: each connects,
/// asks, and disconnects, waiting about a second at most.
package enum PulseIntrospection {
    private final class Answer<Value> {
        var value: Value?
        var done = false
    }

    /// The default sink's latency in nanoseconds: how long after a monitor delivers a sample it is
    /// heard (a sink renders ahead by this much). Nil when the server cannot say within ~1 s.
    static func defaultSinkLatency() -> Int64? {
        let latency: UInt64? = ask { context, answer in
            pa_context_get_sink_info_by_name(context, "@DEFAULT_SINK@", { _, info, eol, userdata in
                let answer = Unmanaged<Answer<UInt64>>.fromOpaque(userdata!).takeUnretainedValue()
                if eol != 0 {
                    answer.done = true
                } else if let info {
                    // What is queued in the sink now: rendered (and seen by its monitor), not yet heard.
                    answer.value = info.pointee.latency
                }
            }, answer)
        }
        return latency.map { Int64($0) * 1000 }
    }

    /// The name of the default source when it is a sink's monitor (what the computer plays, which
    /// PulseAudio makes the default where no microphone is plugged in); nil for a real source, or
    /// when the server cannot say.
    package static func defaultSourceIfMonitor() -> String? {
        ask { context, answer in
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
        _ start: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?
    ) -> Value? {
        guard let loop = pa_mainloop_new() else { return nil }
        defer { pa_mainloop_free(loop) }
        guard let context = pa_context_new(pa_mainloop_get_api(loop), "replayd-introspection") else { return nil }
        defer {
            pa_context_disconnect(context)
            pa_context_unref(context)
        }
        guard pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else { return nil }
        var iterations = 0
        while pa_context_get_state(context) != PA_CONTEXT_READY {
            let state = pa_context_get_state(context)
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED || iterations > 100 { return nil }
            pa_mainloop_iterate(loop, 1, nil)
            iterations += 1
        }
        let answer = Answer<Value>()
        let box = Unmanaged.passRetained(answer)
        defer { box.release() }
        guard let operation = start(context, box.toOpaque()) else { return nil }
        defer { pa_operation_unref(operation) }
        iterations = 0
        while !answer.done, iterations < 100 {
            pa_mainloop_iterate(loop, 1, nil)
            iterations += 1
        }
        return answer.value
    }
}
