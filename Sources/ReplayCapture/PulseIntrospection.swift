import CPulse

/// One-off questions to the PulseAudio server, on the calling (dedicated) thread.
enum PulseIntrospection {
    private final class Answer {
        var latency: UInt64?
        var done = false
    }

    /// The default sink's latency in nanoseconds: how long after a monitor delivers a sample it is
    /// heard (a sink renders ahead by this much). Nil when the server cannot say within ~1 s.
    static func defaultSinkLatency() -> Int64? {
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
        let answer = Answer()
        let box = Unmanaged.passRetained(answer)
        defer { box.release() }
        guard let operation = pa_context_get_sink_info_by_name(context, "@DEFAULT_SINK@", { _, info, eol, userdata in
            let answer = Unmanaged<Answer>.fromOpaque(userdata!).takeUnretainedValue()
            if eol != 0 {
                answer.done = true
            } else if let info {
                // What is queued in the sink now: rendered (and seen by its monitor), not yet heard.
                answer.latency = info.pointee.latency
            }
        }, box.toOpaque()) else { return nil }
        defer { pa_operation_unref(operation) }
        iterations = 0
        while !answer.done, iterations < 100 {
            pa_mainloop_iterate(loop, 1, nil)
            iterations += 1
        }
        return answer.latency.map { Int64($0) * 1000 }
    }
}
