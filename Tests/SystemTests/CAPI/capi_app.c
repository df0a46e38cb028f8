/*
 * A tiny X11 app in C that records, captures and protects itself through libopenreplaykit.so.
 * SystemTests.CAPITests compiles it with `cc $(pkg-config --cflags --libs openreplaykit xcb)` and runs
 * it on a test display against replayd. It prints one JSON line per step; the Swift test checks the
 * figures (and the files with ffprobe and a decoder).
 *
 *   capi_app RECORDING.mp4 CLIP.mp4
 *   capi_app --wait-interrupted     (records until the system stops it; prints the stopped callback's code)
 *
 * Its window: 300x300 at (600, 100), filled with green (0x00ff00), a colour its capture must show
 * at (750, 250), with black elsewhere (at (100, 100)). Its sound: a 700 Hz sine at half scale
 * (libpulse-simple), which its capture must hear.
 */
#include <openreplaykit.h>
#include <pulse/simple.h>
#include <xcb/xcb.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A call's outcome, waited for by the main thread. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done_changed;
    int done;
    int code;
    char message[512];
} outcome;

static void outcome_init(outcome *o) {
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->done_changed, NULL);
    o->done = 0;
    o->code = 1;
    o->message[0] = 0;
}

static void on_completion(int code, const char *message, void *user_data) {
    outcome *o = user_data;
    pthread_mutex_lock(&o->lock);
    o->code = code;
    snprintf(o->message, sizeof o->message, "%s", message ? message : "");
    o->done = 1;
    pthread_cond_signal(&o->done_changed);
    pthread_mutex_unlock(&o->lock);
}

/* Waits up to 30 s; the code (1: no answer). */
static int wait_for(outcome *o) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&o->lock);
    while (!o->done && pthread_cond_timedwait(&o->done_changed, &o->lock, &deadline) == 0) {}
    int code = o->done ? o->code : 1;
    pthread_mutex_unlock(&o->lock);
    return code;
}

/* Prints a message as a JSON string (quotes, backslashes and controls escaped). */
static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

/* Runs one asynchronous call and prints its line. */
#define STEP(name, call)                                                         \
    do {                                                                         \
        outcome o;                                                               \
        outcome_init(&o);                                                        \
        call;                                                                    \
        int code = wait_for(&o);                                                 \
        printf("{\"step\":\"%s\",\"code\":%d,\"name\":\"%s\",\"message\":", name, \
               code, ork_error_name(code));                                     \
        print_json_string(o.message);                                            \
        printf("}\n");                                                           \
        fflush(stdout);                                                          \
    } while (0)

/* What the sample callback saw (written on the library's delivery thread). */
typedef struct {
    pthread_mutex_t lock;
    int video, audio_app, audio_mic;
    int width, height;
    int times_increase;       /* each kind's times in order: pictures strictly, sound chunks of one source too */
    double first_video_pts, last_video_pts, last_audio_pts[2];
    int own[3], other[3];     /* Y, Cb, Cr (full range) at (750, 250) and at (100, 100) of the last picture */
    int channels, sample_rate, bad_audio;
    float peak;
} capture_figures;

static void nv12_at(const ork_sample *s, int x, int y, int out[3]) {
    out[0] = s->planes[0][y * s->strides[0] + x];
    const uint8_t *pair = s->planes[1] + (y / 2) * s->strides[1] + (x / 2) * 2;
    out[1] = pair[0];
    out[2] = pair[1];
}

static void on_sample(const ork_sample *s, void *user_data) {
    capture_figures *f = user_data;
    pthread_mutex_lock(&f->lock);
    if (s->type == ORK_SAMPLE_VIDEO) {
        if (f->video == 0) f->first_video_pts = s->pts_seconds;
        else if (s->pts_seconds <= f->last_video_pts) f->times_increase = 0;
        f->last_video_pts = s->pts_seconds;
        f->video++;
        f->width = s->width;
        f->height = s->height;
        if (s->width > 750 && s->height > 250) {
            nv12_at(s, 750, 250, f->own);
            nv12_at(s, 100, 100, f->other);
        }
    } else {
        int mic = s->type == ORK_SAMPLE_AUDIO_MIC;
        if ((mic ? f->audio_mic : f->audio_app) > 0 && s->pts_seconds <= f->last_audio_pts[mic]) f->times_increase = 0;
        f->last_audio_pts[mic] = s->pts_seconds;
        if (mic) f->audio_mic++; else f->audio_app++;
        f->channels = s->channels;
        f->sample_rate = s->sample_rate;
        if (!s->pcm || s->frames <= 0) f->bad_audio++;
        for (int i = 0; s->pcm && i < s->frames * s->channels; i++) {
            float v = s->pcm[i] < 0 ? -s->pcm[i] : s->pcm[i];
            if (v > f->peak) f->peak = v;
        }
    }
    pthread_mutex_unlock(&f->lock);
}

/* Captures for `seconds` and prints what came. */
static void capture_step(const char *name, double seconds) {
    capture_figures f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.lock, NULL);
    f.times_increase = 1;
    outcome started;
    outcome_init(&started);
    ork_start_capture(on_sample, &f, on_completion, &started);
    int start_code = wait_for(&started);
    usleep((useconds_t)(seconds * 1e6));
    int capturing = ork_is_capturing();
    outcome stopped;
    outcome_init(&stopped);
    ork_stop_capture(on_completion, &stopped);
    int stop_code = wait_for(&stopped);
    pthread_mutex_lock(&f.lock);
    printf("{\"step\":\"%s\",\"start\":%d,\"capturing\":%s,\"stop\":%d,\"video\":%d,\"audioApp\":%d,\"audioMic\":%d,"
           "\"width\":%d,\"height\":%d,\"timesIncrease\":%s,\"span\":%.3f,\"own\":[%d,%d,%d],\"other\":[%d,%d,%d],"
           "\"channels\":%d,\"rate\":%d,\"badAudio\":%d,\"peak\":%.4f}\n",
           name, start_code, capturing ? "true" : "false", stop_code, f.video, f.audio_app, f.audio_mic, f.width, f.height,
           f.times_increase ? "true" : "false", f.last_video_pts - f.first_video_pts, f.own[0], f.own[1], f.own[2],
           f.other[0], f.other[1], f.other[2], f.channels, f.sample_rate, f.bad_audio, f.peak);
    fflush(stdout);
    pthread_mutex_unlock(&f.lock);
}

/* isCaptured as the watcher saw it: a string of 0s and 1s. */
static pthread_mutex_t captured_lock = PTHREAD_MUTEX_INITIALIZER;
static char captured_seen[64];

static void on_captured(bool captured, void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&captured_lock);
    size_t n = strlen(captured_seen);
    if (n + 1 < sizeof captured_seen) captured_seen[n] = captured ? '1' : '0';
    pthread_mutex_unlock(&captured_lock);
}

/* The app's tone, 20 ms blocks to the sound server until the program ends. */
static void *play_tone(void *unused) {
    (void)unused;
    pa_sample_spec spec = {.format = PA_SAMPLE_FLOAT32LE, .rate = 48000, .channels = 2};
    pa_simple *pulse = pa_simple_new(NULL, "capi_app", PA_STREAM_PLAYBACK, NULL, "tone", &spec, NULL, NULL, NULL);
    if (!pulse) {
        fprintf(stderr, "capi_app: no sound server\n");
        return NULL;
    }
    float block[960 * 2];
    for (long n = 0;;) {
        for (int i = 0; i < 960; i++, n++) block[2 * i] = block[2 * i + 1] = 0.5f * (float)sin(2 * M_PI * 700 * (double)n / 48000);
        if (pa_simple_write(pulse, block, sizeof block, NULL) < 0) break;
    }
    pa_simple_free(pulse);
    return NULL;
}

/* Records until the system ends the recording (the person's `replay record`); its stopped callback's line. */
static int wait_interrupted(void) {
    outcome stopped;
    outcome_init(&stopped);
    ork_set_recording_stopped_callback(on_completion, &stopped);
    STEP("start", ork_start_recording(on_completion, &o));
    printf("{\"step\":\"recording\",\"isRecording\":%s}\n", ork_is_recording() ? "true" : "false");
    fflush(stdout);
    int code = wait_for(&stopped);
    printf("{\"step\":\"stopped-by-system\",\"code\":%d,\"name\":\"%s\",\"message\":", code, ork_error_name(code));
    print_json_string(stopped.message);
    printf(",\"isRecording\":%s}\n", ork_is_recording() ? "true" : "false");
    fflush(stdout);
    ork_set_recording_stopped_callback(NULL, NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 2 && strcmp(argv[1], "--wait-interrupted") == 0)) {
        fprintf(stderr, "usage: %s RECORDING.mp4 CLIP.mp4 | --wait-interrupted\n", argv[0]);
        return 2;
    }

    /* The app's window, green, mapped before anything is recorded. */
    xcb_connection_t *x = xcb_connect(NULL, NULL);
    if (xcb_connection_has_error(x)) {
        fprintf(stderr, "capi_app: no X display\n");
        return 1;
    }
    xcb_screen_t *screen = xcb_setup_roots_iterator(xcb_get_setup(x)).data;
    xcb_window_t window = xcb_generate_id(x);
    uint32_t values[] = {0x00ff00, 1};
    xcb_create_window(x, XCB_COPY_FROM_PARENT, window, screen->root, 600, 100, 300, 300, 0,
                      XCB_WINDOW_CLASS_INPUT_OUTPUT, screen->root_visual, XCB_CW_BACK_PIXEL | XCB_CW_OVERRIDE_REDIRECT, values);
    xcb_map_window(x, window);
    xcb_flush(x);
    free(xcb_get_input_focus_reply(x, xcb_get_input_focus(x), NULL));   /* mapped when the server answered */
    pthread_t tone;
    pthread_create(&tone, NULL, play_tone, NULL);
    usleep(300 * 1000);   /* its stream is up */
    printf("{\"step\":\"window\",\"id\":%u}\n", window);
    printf("{\"step\":\"names\",\"userDeclined\":\"%s\",\"zero\":\"%s\",\"other\":\"%s\"}\n",
           ork_error_name(ORK_ERROR_USER_DECLINED), ork_error_name(0), ork_error_name(42));
    printf("{\"step\":\"available\",\"available\":%s}\n", ork_is_available() ? "true" : "false");
    fflush(stdout);
    if (argc == 2) return wait_interrupted();
    const char *recording = argv[1], *clip = argv[2];

    /* The error path: nothing records yet. */
    STEP("stop-nothing", ork_stop_recording_to_file(recording, on_completion, &o));
    STEP("stop-capture-nothing", ork_stop_capture(on_completion, &o));

    int64_t watch = ork_watch_captured(on_captured, NULL);

    /* A 3 s recording to a file. */
    STEP("start", ork_start_recording(on_completion, &o));
    printf("{\"step\":\"recording\",\"isRecording\":%s}\n", ork_is_recording() ? "true" : "false");
    fflush(stdout);
    STEP("start-again", ork_start_recording(on_completion, &o));
    sleep(3);
    STEP("stop", ork_stop_recording_to_file(recording, on_completion, &o));
    printf("{\"step\":\"stopped\",\"isRecording\":%s}\n", ork_is_recording() ? "true" : "false");
    fflush(stdout);

    /* In-app capture: its own green window on black. */
    capture_step("capture", 3);

    /* Protected: the window is blanked in its own capture too; then unprotected again. */
    char message[256];
    int bad = ork_protect_window(0x7ffffff0u, true, NULL, message, sizeof message);
    printf("{\"step\":\"protect-bad\",\"code\":%d,\"message\":", bad);
    print_json_string(message);
    printf("}\n");
    int protect = ork_protect_window(window, true, NULL, message, sizeof message);
    printf("{\"step\":\"protect\",\"code\":%d}\n", protect);
    fflush(stdout);
    capture_step("capture-protected", 2);
    ork_protect_window(window, false, NULL, NULL, 0);

    /* A clip: buffer 3 s, export the last 2. */
    STEP("clip-start", ork_start_clip_buffering(on_completion, &o));
    sleep(3);
    STEP("clip-export", ork_export_clip(clip, 2, on_completion, &o));
    STEP("clip-export-too-long", ork_export_clip(clip, 20, on_completion, &o));
    STEP("clip-stop", ork_stop_clip_buffering(on_completion, &o));
    usleep(300 * 1000);   /* the last isCaptured change arrives */

    ork_unwatch_captured(watch);
    pthread_mutex_lock(&captured_lock);
    printf("{\"step\":\"captured\",\"seen\":\"%s\",\"now\":%s}\n", captured_seen, ork_screen_is_captured() ? "true" : "false");
    pthread_mutex_unlock(&captured_lock);
    fflush(stdout);

    xcb_disconnect(x);
    return 0;
}
