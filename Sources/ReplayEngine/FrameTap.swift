package import ReplayMedia

/// Receives the pictures the capture makes, before the encoder: the seam for in-app capture and
/// broadcast extensions, whose frames travel to their process through a shared-memory ring.
///
/// Called on the capture thread for every picture that goes towards the encoder (each change, the
/// repeats, the last one), even when the encoder is behind and the picture is dropped there, with
/// the capture's own canvas (I420, video range) and its time: `tick` in frames of the capture's
/// rate, `time` on the engine's monotonic clock (nanoseconds, `MonotonicClock`). With no destination
/// nothing is encoded and no repeat pushes a change through an encoder: each change, then one a second. A tap copies what it needs before
/// it returns and never blocks: a consumer that is behind loses whole pictures (counted by the
/// tap); the capture never waits for it.
package protocol FrameTap: AnyObject, Sendable {
    func receive(_ picture: VideoFrame, tick: Int64, time: Int64)
}

/// Where a tapped block of sound comes from: what the session's applications play (the system mix,
/// or one app's own streams), or the microphone.
package enum TappedAudioSource: Sendable {
    case application
    case microphone
}

/// Receives the capture's sound, source by source, as the audio thread cuts it for the encoder:
/// interleaved stereo Float32 at 48 kHz, `time` the first sample's on the engine's monotonic clock
/// (nanoseconds), contiguous from one block to the next (gaps were filled with silence, counted, by
/// the mixer), the microphone silent while it is off. Called on the audio thread; like a `FrameTap`,
/// a tap copies what it needs and never blocks.
package protocol AudioTap: AnyObject, Sendable {
    func receive(audio samples: UnsafeBufferPointer<Float>, from source: TappedAudioSource, time: Int64)
}
