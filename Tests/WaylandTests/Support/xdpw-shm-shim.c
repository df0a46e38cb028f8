/* LD_PRELOAD shim for xdg-desktop-portal-wlr 0.7.x on GPU-less wlroots (pixman renderer), from the
 * Wayland probe (../shared/wayland-probes/sway/). SwaySession compiles it into its temporary folder
 * at start (cc -shared -fPIC -O2 -o xdpw-shm-shim.so xdpw-shm-shim.c -ldl); no binary is kept.
 * xdpw 0.7.x refuses to Start() a screencast unless zwlr_screencopy_frame_v1 sent a
 * linux_dmabuf event (check in screencast.c start_screencast(); upstream issue #289).
 * pixman-rendered wlroots only offers wl_shm. This shim wraps the frame listener and,
 * after every `buffer` event, synthesizes a `linux_dmabuf` event with the same format/size.
 * Since the compositor has no zwp_linux_dmabuf_v1 global, xdpw finds no modifiers and
 * negotiates an SHM-only PipeWire format, which works. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
/* no libwayland-dev needed: resolved at run time from the libwayland-client already in xdpw */
struct wl_proxy;
const char *wl_proxy_get_class(struct wl_proxy *proxy);

typedef void (*fn)(void);
typedef void (*buffer_cb)(void *, struct wl_proxy *, uint32_t, uint32_t, uint32_t, uint32_t);
typedef void (*dmabuf_cb)(void *, struct wl_proxy *, uint32_t, uint32_t, uint32_t);

#define N_EVENTS 7 /* buffer flags ready failed damage linux_dmabuf buffer_done */
static fn orig_frame[N_EVENTS];
static fn wrapped_frame[N_EVENTS];

static void wrap_buffer(void *data, struct wl_proxy *frame, uint32_t shm_format,
		uint32_t w, uint32_t h, uint32_t stride) {
	((buffer_cb)orig_frame[0])(data, frame, shm_format, w, h, stride);
	/* wl_shm ARGB8888=0 / XRGB8888=1, all other values are already DRM fourccs */
	uint32_t fourcc = shm_format == 0 ? 0x34325241 /* AR24 */ :
	                  shm_format == 1 ? 0x34325258 /* XR24 */ : shm_format;
	if (orig_frame[5])
		((dmabuf_cb)orig_frame[5])(data, frame, fourcc, w, h);
}

int wl_proxy_add_listener(struct wl_proxy *proxy, fn *impl, void *data) {
	static int (*real)(struct wl_proxy *, fn *, void *);
	if (!real)
		real = (int (*)(struct wl_proxy *, fn *, void *))dlsym(RTLD_NEXT, "wl_proxy_add_listener");
	if (strcmp(wl_proxy_get_class(proxy), "zwlr_screencopy_frame_v1") == 0) {
		memcpy(orig_frame, impl, sizeof orig_frame);   /* xdpw uses one static listener */
		memcpy(wrapped_frame, impl, sizeof wrapped_frame);
		wrapped_frame[0] = (fn)wrap_buffer;
		return real(proxy, wrapped_frame, data);
	}
	return real(proxy, impl, data);
}
