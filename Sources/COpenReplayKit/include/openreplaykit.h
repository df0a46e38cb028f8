/*
 * openreplaykit.h — OpenReplayKit's app API in C (libopenreplaykit.so; `pkg-config openreplaykit`).
 *
 * The same calls as the Swift library (docs/APP-API.md): an app records, captures and protects
 * ITSELF through replayd (its own windows and sound, never another app's; the person is asked
 * first). Every name is prefixed `ork_`. From C, C++, Rust or Python (ctypes).
 *
 * Threads. Every call returns at once and is safe from any thread. Completion callbacks run later
 * on a thread of the library's own (never the caller's, also when the call fails at once); they may
 * call the library again, but must not wait in it for another call's completion (the library's
 * threads are few: signal your own thread instead). Sample callbacks (ork_start_capture) run on one
 * delivery thread of the library's, one at a time, in time order. Nothing runs on your toolkit's
 * main loop: hop to it before touching widgets. Keep a sample callback short: while it runs, newer
 * pictures wait, and replayd drops whole pictures (counted) rather than wait for a slow app.
 *
 * Lifetimes. Every pointer a callback receives (the message, the sample and its planes or PCM) is
 * valid only until that callback returns: copy what you keep. Strings you pass are copied before
 * the call returns. `user_data` is passed back untouched; it must stay valid until the callback
 * that receives it has run (for ork_start_capture's sample_user_data: until ork_stop_capture completed).
 *
 * Errors. A callback's `code` is 0 on success, else ReplayKit's RPRecordingErrorCode raw value
 * (ORK_ERROR_USER_DECLINED = -5801, …), and `message` says what happened and what to do (UTF-8;
 * NULL on success). ork_error_name gives a code's name.
 */
#ifndef OPENREPLAYKIT_H
#define OPENREPLAYKIT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ReplayKit's error codes (RPRecordingErrorCode), with iOS's raw values. */
typedef enum ork_error_code {
    ORK_OK = 0,
    ORK_ERROR_UNKNOWN = -5800,
    ORK_ERROR_USER_DECLINED = -5801,
    ORK_ERROR_DISABLED = -5802,
    ORK_ERROR_FAILED_TO_START = -5803,
    ORK_ERROR_FAILED = -5804,
    ORK_ERROR_INSUFFICIENT_STORAGE = -5805,
    ORK_ERROR_INTERRUPTED = -5806,
    ORK_ERROR_CONTENT_RESIZE = -5807,
    ORK_ERROR_BROADCAST_INVALID_SESSION = -5808,
    ORK_ERROR_SYSTEM_DORMANCY = -5809,
    ORK_ERROR_ENTITLEMENTS = -5810,
    ORK_ERROR_ACTIVE_PHONE_CALL = -5811,
    ORK_ERROR_FAILED_TO_SAVE = -5812,
    ORK_ERROR_CAR_PLAY = -5813,
    ORK_ERROR_FAILED_APPLICATION_CONNECTION_INVALID = -5814,
    ORK_ERROR_FAILED_APPLICATION_CONNECTION_INTERRUPTED = -5815,
    ORK_ERROR_FAILED_NO_MATCHING_APPLICATION_CONTEXT = -5816,
    ORK_ERROR_FAILED_MEDIA_SERVICES_FAILURE = -5817,
    ORK_ERROR_VIDEO_MIXING_FAILURE = -5818,
    ORK_ERROR_BROADCAST_SETUP_FAILED = -5819,
    ORK_ERROR_FAILED_TO_OBTAIN_URL = -5820,
    ORK_ERROR_FAILED_INCORRECT_TIME_STAMPS = -5821,
    ORK_ERROR_FAILED_TO_PROCESS_FIRST_SAMPLE = -5822,
    ORK_ERROR_FAILED_ASSET_WRITER_FAILED_TO_SAVE = -5823,
    ORK_ERROR_FAILED_NO_ASSET_WRITER = -5824,
    ORK_ERROR_FAILED_ASSET_WRITER_IN_WRONG_STATE = -5825,
    ORK_ERROR_FAILED_ASSET_WRITER_EXPORT_FAILED = -5826,
    ORK_ERROR_FAILED_TO_REMOVE_FILE = -5827,
    ORK_ERROR_FAILED_ASSET_WRITER_EXPORT_CANCELED = -5828,
    ORK_ERROR_ATTEMPT_TO_STOP_NON_RECORDING = -5829,
    ORK_ERROR_ATTEMPT_TO_START_IN_RECORDING_STATE = -5830,
    ORK_ERROR_PHOTO_FAILURE = -5831,
    ORK_ERROR_RECORDING_INVALID_SESSION = -5832,
    ORK_ERROR_FAILED_TO_START_CAPTURE_STACK = -5833,
    ORK_ERROR_INVALID_PARAMETER = -5834,
    ORK_ERROR_FILE_PERMISSIONS = -5835,
    ORK_ERROR_EXPORT_CLIP_TO_URL_IN_PROGRESS = -5836,
    ORK_ERROR_CODEC_NOT_SUPPORTED = -5837
} ork_error_code;

/* ReplayKit's error domain, as NSError.domain says it on iOS. */
#define ORK_ERROR_DOMAIN "com.apple.ReplayKit.RPRecordingErrorDomain"

/* The end of a call: code 0 (message NULL), or an error code and what happened. */
typedef void (*ork_completion_fn)(int code, const char *message, void *user_data);

/* The name of a code as the Swift enum spells it ("userDeclined"), "ok" for 0, "unknown" for
 * anything else. A static string. */
const char *ork_error_name(int code);

/* MARK: the recorder (RPScreenRecorder.shared()) */

/* Whether the app can record: false without a display (DISPLAY unset, or no X server on it) and
 * while the person records the screen. */
bool ork_is_available(void);
/* Whether the app's recording runs. */
bool ork_is_recording(void);
/* Record the default microphone too (set before starting). Off by default. */
bool ork_is_microphone_enabled(void);
void ork_set_microphone_enabled(bool enabled);

/* Starts recording the app's windows and sound. The first start of this program asks the person
 * (the answer holds 8 minutes): "Don't Allow" gives ORK_ERROR_USER_DECLINED. */
void ork_start_recording(ork_completion_fn completion, void *user_data);
/* Stops the recording and writes the movie (MP4) to `path`, a new file; no preview. The path is
 * checked before stopping: with a bad one the recording goes on. */
void ork_stop_recording_to_file(const char *path, ork_completion_fn completion, void *user_data);
/* Stops the recording; replayd keeps the movie and shows the person its preview window (trim, Save
 * to the Videos folder, Share…, Cancel). */
void ork_stop_recording_and_preview(ork_completion_fn completion, void *user_data);
/* Removes a kept movie (stopping a running recording first). Its completion's code is always 0. */
void ork_discard_recording(ork_completion_fn completion, void *user_data);

/* Called when the SYSTEM ends the app's recording: ORK_ERROR_INTERRUPTED (the person started a
 * recording of the screen; the app's recording is discarded), a failure, or
 * ORK_ERROR_FAILED_APPLICATION_CONNECTION_INTERRUPTED (replayd went away). RPScreenRecorderDelegate's
 * screenRecorder(_:didStopRecordingWith:error:). NULL removes it. */
void ork_set_recording_stopped_callback(ork_completion_fn callback, void *user_data);

/* MARK: in-app capture */

/* RPSampleBufferType's raw values. */
typedef enum ork_sample_type {
    ORK_SAMPLE_VIDEO = 1,      /* a picture: NV12, the screen's size, the app's windows on black */
    ORK_SAMPLE_AUDIO_APP = 2,  /* sound the app plays */
    ORK_SAMPLE_AUDIO_MIC = 3   /* the microphone (only while enabled) */
} ork_sample_type;

/* One sample. Every pointer in it is valid only during the callback that receives it. */
typedef struct ork_sample {
    ork_sample_type type;
    /* Presentation time on the session clock (CLOCK_MONOTONIC), in nanoseconds and in seconds. */
    int64_t pts_ns;
    double pts_seconds;
    /* ORK_SAMPLE_VIDEO: NV12 in full range, BT.601 (ReplayKit's 420YpCbCr8BiPlanarFullRange, the Swift
     * library's CVPixelBuffer bytes): black is Y 0, white Y 255, greys' Cb Cr 128; pure green Y 150, Cb 44,
     * Cr 21 (measured 149, 44, 21). planes[0] is Y (width x height bytes, strides[0] bytes a row);
     * planes[1] is CbCr interleaved (width/2 pairs x height/2 rows, strides[1] bytes a row). */
    int32_t width;
    int32_t height;
    const uint8_t *planes[2];
    int32_t strides[2];
    /* ORK_SAMPLE_AUDIO_*: `frames` frames of `channels` interleaved Float32 samples at `sample_rate` Hz
     * (48000, stereo). */
    const float *pcm;
    int32_t frames;
    int32_t channels;
    int32_t sample_rate;
} ork_sample;

typedef void (*ork_sample_fn)(const ork_sample *sample, void *user_data);

/* Starts in-app capture: the app's pictures and sound (and the microphone when enabled) come to
 * `on_sample` (with `sample_user_data`) on the library's delivery thread, in time order; pictures
 * follow changes (a still window gives its first picture, then one a second). `completion` (with
 * `user_data`) gets the start's outcome (consent as for ork_start_recording). */
void ork_start_capture(ork_sample_fn on_sample, void *sample_user_data, ork_completion_fn completion, void *user_data);
/* Stops in-app capture: no sample comes after its completion runs. */
void ork_stop_capture(ork_completion_fn completion, void *user_data);
bool ork_is_capturing(void);

/* MARK: clip buffering (iOS 15) */

/* Keeps the app's last 15 s, encoded, in replayd's memory (consent as for recording). */
void ork_start_clip_buffering(ork_completion_fn completion, void *user_data);
void ork_stop_clip_buffering(ork_completion_fn completion, void *user_data);
/* Writes the last `seconds` (0 < seconds <= 15) to `path` (a new file) as an MP4, while buffering
 * goes on. It starts at a keyframe: up to 2 s longer than asked. */
void ork_export_clip(const char *path, double seconds, ork_completion_fn completion, void *user_data);

/* MARK: broadcasting (RPBroadcastActivityViewController, RPBroadcastController, RPSystemBroadcastPickerView) */

/* The app's own broadcast: shows the broadcast picker on the app's display (only
 * `preferred_extension`, an upload extension's identifier, when not NULL), then the pairing prompt
 * naming the app and the service (every time), then sends the app's own windows and sound (and the
 * microphone when switched on in the picker or with ork_set_microphone_enabled) to the service's
 * upload extension. `completion` gets the outcome once it runs (ORK_ERROR_USER_DECLINED when the
 * person cancelled the picker or declined). One broadcast per process. It pauses by itself when
 * another application takes the focus: ork_resume_broadcast resumes it. */
void ork_start_broadcast(const char *preferred_extension, ork_completion_fn completion, void *user_data);
void ork_pause_broadcast(ork_completion_fn completion, void *user_data);
void ork_resume_broadcast(ork_completion_fn completion, void *user_data);
/* Ends the broadcast; `completion` runs once the extension has left. */
void ork_finish_broadcast(ork_completion_fn completion, void *user_data);
bool ork_is_broadcasting(void);
bool ork_is_broadcast_paused(void);
/* Copies where viewers watch (empty until the extension said) into `buffer` (up to `size` bytes with
 * its NUL) when that is not NULL; returns the URL's full length in bytes. */
int32_t ork_broadcast_url(char *buffer, int32_t size);
/* `callback` hears the end of a broadcast the app did not finish (the extension failed, the person's
 * broadcast or recording interrupted it): its code and words. NULL stops that. */
void ork_set_broadcast_ended_callback(ork_completion_fn callback, void *user_data);
/* RPSystemBroadcastPickerView's action: the picker (only `preferred_extension` when not NULL; its
 * microphone switch hidden unless `shows_microphone_button`), then the person's broadcast of the
 * whole screen, which the app does not own (it cannot stop it; it goes on after the app quits). */
void ork_show_system_broadcast_picker(const char *preferred_extension, bool shows_microphone_button,
                                      ork_completion_fn completion, void *user_data);

/* MARK: the screen (RPScreen.main) */

/* Whether any OpenReplayKit session (the person's or any app's) captures the screen now. The first
 * read starts watching (it reads false until replayd answered). */
bool ork_screen_is_captured(void);

typedef void (*ork_captured_fn)(bool captured, void *user_data);

/* Calls `callback` with the current value, then on each change, on a thread of the library's,
 * until ork_unwatch_captured. Returns a token (> 0) for that. */
int64_t ork_watch_captured(ork_captured_fn callback, void *user_data);
/* No call to the watcher starts after this returns (one already under way may finish after it). */
void ork_unwatch_captured(int64_t token);

/* MARK: content protection (RPContentProtection) */

/* Marks (protect = true) or unmarks the app's top-level X11 window `window_id` on `display` (NULL:
 * DISPLAY) as protected: every session blanks it. Returns 0 or an error code (ORK_ERROR_INVALID_PARAMETER:
 * no display, not a window); the message goes to `message` (up to `message_size` bytes with its
 * NUL) when that is not NULL. Synchronous. */
int ork_protect_window(uint32_t window_id, bool protect, const char *display, char *message, int32_t message_size);
/* Marks every PulseAudio stream this process opens from now on as protected (silent in every
 * session). Call it before the app's first connection to the sound server. */
void ork_protect_audio(void);

#ifdef __cplusplus
}
#endif

#endif /* OPENREPLAYKIT_H */
