# OpenReplayKit — the two commands a new user runs: `make demo` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
DEBUG_BIN := $(CURDIR)/.build/debug
RELEASE_BIN := $(CURDIR)/.build/release

.PHONY: all bootstrap build release-cli release-lib release bench-tools test demo bench install install-lib uninstall clean cli-docs cli-release cli-debug lib-release lib-debug icons

all: build

## bootstrap: install the system packages (Debian 12, as root; idempotent).
bootstrap:
	@bash scripts/bootstrap.sh

## build: debug build of everything.
build: bootstrap
	$(SWIFT) build

## release-cli: release builds of the programs a user runs (`make install` needs only these).
release-cli: bootstrap
	$(SWIFT) build -c release --product replayd
	$(SWIFT) build -c release --product replay
	$(SWIFT) build -c release --product replay-ui
	$(SWIFT) build -c release --product replay-extension-rtmp
	$(SWIFT) build -c release --product replay-extension-rtmp-setup
	$(SWIFT) build -c release --product replay-extension-reference

## release-lib: the release build of libopenreplaykit.so, the C API for apps (`make install` installs it).
release-lib: bootstrap
	$(SWIFT) build -c release --product openreplaykit

release: release-cli release-lib
	$(SWIFT) build -c release --product replay-testcontent
	$(SWIFT) build -c release --product broadcast-service
	$(SWIFT) build -c release --product sketchpad

bench-tools: release
	$(SWIFT) build -c release --product replay-bench
	$(SWIFT) build -c release --product replay-ring
	$(SWIFT) build -c release --product replay-testapp
	$(SWIFT) build -c release --product replay-wayland-bench

## test: install what tests need, build, run every test (unit, in-process C, whole system).
## Five runs, each with the machine to itself: the unit and in-process tests; the broadcast service
## against its real servers, ffmpeg publishers and Chromium; the screen-recording system tests, which
## measure frames and sound timing; then the system windows (GTK under Xvfb, xdotool) and the engine's
## in-process test on a real display (side by side with the system tests, their X servers, encoders
## and GTK windows starved those: a stop that waited a minute, a live stream read too slowly); last the
## Wayland tests, on a headless GNOME Shell with its screen-cast portal and PipeWire.
## Each under a deadline (scripts/test-phase.sh): a hanging test fails the run in minutes and says so.
## Side by side on 2 cores, the browsers, encoders and X servers of one group starve the others.
UNIT_TESTS_SKIP := ^(SystemTests|SystemWindowsTests|BroadcastServiceTests)\.|EngineDestinationsTests|^WaylandTests\.
SYSTEM_TESTS := ^SystemTests\.
WINDOW_TESTS := ^SystemWindowsTests\.|EngineDestinationsTests
test: bootstrap
	@mkdir -p .build
	set -o pipefail; $(SWIFT) build --build-tests 2>&1 | tee .build/build-tests.log
	@if grep -E '^$(CURDIR)/(Sources|Tests|Benchmarks|Extensions)/[^ ]+: warning:' .build/build-tests.log; then \
	  echo "make test: the build above has warnings in our code (the house rule is none): fix them"; exit 1; fi
	ORK_BIN_DIR=$(DEBUG_BIN) bash scripts/test-phase.sh "unit tests" 15 $(SWIFT) test --skip-build --skip '$(UNIT_TESTS_SKIP)'
	ORK_BIN_DIR=$(DEBUG_BIN) bash scripts/test-phase.sh "broadcast service tests" 15 $(SWIFT) test --skip-build --filter '^BroadcastServiceTests\.'
	ORK_BIN_DIR=$(DEBUG_BIN) bash scripts/test-phase.sh "system tests" 35 $(SWIFT) test --skip-build --filter '$(SYSTEM_TESTS)'
	ORK_BIN_DIR=$(DEBUG_BIN) bash scripts/test-phase.sh "system windows and engine destinations" 15 $(SWIFT) test --skip-build --filter '$(WINDOW_TESTS)'
	ORK_BIN_DIR=$(DEBUG_BIN) bash scripts/test-phase.sh "wayland tests" 10 $(SWIFT) test --skip-build --filter '^WaylandTests\.'

## demo: record 10 s of the screen (a virtual display with moving content and sound when there is none);
## on that virtual display, SketchPad (Examples/SketchPad) records itself, driven with xdotool; then a live broadcast.
demo: release
	ORK_BIN_DIR=$(RELEASE_BIN) bash scripts/demo.sh

## install: `replay`, `replayd` and `replay-ui` (release builds) into $(PREFIX)/bin, the C API for apps
## (install-lib below), replayd's systemd user unit
## into $(PREFIX)/lib/systemd/user (a folder systemd reads for every user), the "Screen Recording"
## desktop entry and its icon, the man pages of replay and replayd, and replay's completion scripts
## for bash, zsh and fish, each where its tool looks under $(PREFIX)/share. As root.
## CONFIGURATION=debug installs the debug build instead (what the install test does; build it first).
PREFIX ?= /usr/local
CONFIGURATION ?= release
BUILT_BIN := $(CURDIR)/.build/$(CONFIGURATION)
CLI_DOCS := $(CURDIR)/.build/cli-docs
APP_ID := org.openreplaykit.ScreenRecording
ICON_SIZES := 16 24 32 48 64 128 256
UNIT_DIR := $(DESTDIR)$(PREFIX)/lib/systemd/user
SHARE_DIR := $(DESTDIR)$(PREFIX)/share
# The broadcast extensions that ship, upload and setup (Extensions/<name>/: manifest.json, icon.png, the product).
EXTENSIONS := RTMP RTMPSetup Reference
EXTENSION_DIR := $(SHARE_DIR)/openreplaykit/extensions
MAN_DIR := $(SHARE_DIR)/man/man1
BASH_COMPLETION_DIR := $(SHARE_DIR)/bash-completion/completions
ZSH_COMPLETION_DIR := $(SHARE_DIR)/zsh/site-functions
FISH_COMPLETION_DIR := $(SHARE_DIR)/fish/vendor_completions.d
# Extra options for `swift package` (the install test passes --ignore-lock: it runs inside `swift test`).
SWIFT_PACKAGE_FLAGS ?=

cli-release: release-cli
cli-debug:
lib-release: release-lib
lib-debug:

## install-lib: the C API for apps: libopenreplaykit.so into $(PREFIX)/lib, openreplaykit.h into
## $(PREFIX)/include, openreplaykit.pc into $(PREFIX)/lib/pkgconfig (its Libs carry an rpath to
## $(PREFIX)/lib). The library finds the Swift runtime through the RUNPATH swiftc gives it on Linux:
## the toolchain's runtime folder ($(SWIFT_RUNTIME_DIR)), so `ldd` resolves while that toolchain stays.
SWIFT_RUNTIME_DIR := $(shell dirname "$$(readlink -f "$$(command -v $(SWIFT))")" 2>/dev/null)/../lib/swift/linux
LIB_VERSION := $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/replay/Replay.swift)
LIB_DIR := $(DESTDIR)$(PREFIX)/lib
install-lib: lib-$(CONFIGURATION)
	install -d $(LIB_DIR)/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BUILT_BIN)/libopenreplaykit.so $(LIB_DIR)/
	install -m 644 Sources/COpenReplayKit/include/openreplaykit.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(LIB_VERSION)|' -e "s|@SWIFT_RUNTIME@|$$(readlink -m $(SWIFT_RUNTIME_DIR))|" \
	  dist/pkgconfig/openreplaykit.pc.in > $(LIB_DIR)/pkgconfig/openreplaykit.pc
	chmod 644 $(LIB_DIR)/pkgconfig/openreplaykit.pc
	@# dlopen by name (Python's ctypes) finds it in /usr/local/lib once the loader's cache knows it.
	@if [ -z "$(DESTDIR)" ] && [ "$(PREFIX)" = /usr/local ] && [ -w /etc/ld.so.cache ] && command -v ldconfig >/dev/null; then ldconfig || true; fi

## cli-docs: the man pages of replay and replayd (swift-argument-parser's generate-manual plugin,
## from their --help; the plugin builds every product of the package in CONFIGURATION and writes a
## page for each; blank lines become mdoc paragraphs) and replay's completion scripts, into .build/cli-docs.
cli-docs: cli-$(CONFIGURATION)
	rm -rf $(CLI_DOCS) && mkdir -p $(CLI_DOCS)
	$(SWIFT) package $(SWIFT_PACKAGE_FLAGS) plugin generate-manual --configuration $(CONFIGURATION) \
	  --authors 'the OpenReplayKit authors'
	for page in replay replayd; do \
	  sed 's/^$$/.Pp/' .build/plugins/GenerateManual/outputs/$$page/$$page.1 > $(CLI_DOCS)/$$page.1 || exit 1; \
	done
	$(BUILT_BIN)/replay --generate-completion-script bash > $(CLI_DOCS)/replay.bash
	$(BUILT_BIN)/replay --generate-completion-script zsh > $(CLI_DOCS)/_replay
	$(BUILT_BIN)/replay --generate-completion-script fish > $(CLI_DOCS)/replay.fish

## The GNOME Shell extension that tells replayd alone which windows are an app's (apps' own sessions on
## GNOME, docs/WAYLAND.md), in the system-wide folder GNOME Shell reads: the GNOME 43/44 build, or the
## 45+ build (ES modules) when the installed gnome-shell is 45 or later.
GNOME_EXTENSION := openreplaykit@openreplaykit.org
GNOME_EXTENSION_DIR := $(SHARE_DIR)/gnome-shell/extensions
GNOME_EXTENSION_BUILD := $(shell v=$$(gnome-shell --version 2>/dev/null | sed -n 's/[^0-9]*\([0-9]*\).*/\1/p'); \
  if [ -n "$$v" ] && [ "$$v" -ge 45 ]; then echo dist/gnome-shell-45; else echo dist/gnome-shell; fi)

install: cli-docs install-lib
	install -d $(DESTDIR)$(PREFIX)/bin $(UNIT_DIR) $(SHARE_DIR)/applications $(SHARE_DIR)/icons/hicolor/scalable/apps \
	  $(MAN_DIR) $(BASH_COMPLETION_DIR) $(ZSH_COMPLETION_DIR) $(FISH_COMPLETION_DIR)
	install -m 755 $(BUILT_BIN)/replay $(BUILT_BIN)/replayd $(BUILT_BIN)/replay-ui $(DESTDIR)$(PREFIX)/bin/
	sed 's|@BINDIR@|$(PREFIX)/bin|' dist/systemd/replayd.service > $(UNIT_DIR)/replayd.service
	chmod 644 $(UNIT_DIR)/replayd.service
	sed 's|@BINDIR@|$(PREFIX)/bin|' dist/desktop/$(APP_ID).desktop > $(SHARE_DIR)/applications/$(APP_ID).desktop
	chmod 644 $(SHARE_DIR)/applications/$(APP_ID).desktop
	install -m 644 dist/desktop/icons/$(APP_ID).svg $(SHARE_DIR)/icons/hicolor/scalable/apps/
	for size in $(ICON_SIZES); do \
	  install -d $(SHARE_DIR)/icons/hicolor/$${size}x$${size}/apps && \
	  install -m 644 dist/desktop/icons/$(APP_ID)-$$size.png $(SHARE_DIR)/icons/hicolor/$${size}x$${size}/apps/$(APP_ID).png || exit 1; \
	done
	install -m 644 $(CLI_DOCS)/replay.1 $(CLI_DOCS)/replayd.1 $(MAN_DIR)/
	install -m 644 $(CLI_DOCS)/replay.bash $(BASH_COMPLETION_DIR)/replay
	install -m 644 $(CLI_DOCS)/_replay $(ZSH_COMPLETION_DIR)/_replay
	install -m 644 $(CLI_DOCS)/replay.fish $(FISH_COMPLETION_DIR)/replay.fish
	for ext in $(EXTENSIONS); do \
	  id=$$(sed -n 's/.*"identifier": *"\([^"]*\)".*/\1/p' Extensions/$$ext/manifest.json) && \
	  exe=$$(sed -n 's/.*"executable": *"\([^"]*\)".*/\1/p' Extensions/$$ext/manifest.json) && \
	  install -d $(EXTENSION_DIR)/$$id.orkextension && \
	  install -m 644 Extensions/$$ext/manifest.json Extensions/$$ext/icon.png $(EXTENSION_DIR)/$$id.orkextension/ && \
	  install -m 755 $(BUILT_BIN)/$$exe $(EXTENSION_DIR)/$$id.orkextension/$$exe || exit 1; \
	done
	install -d $(GNOME_EXTENSION_DIR)/$(GNOME_EXTENSION)
	install -m 644 $(GNOME_EXTENSION_BUILD)/$(GNOME_EXTENSION)/metadata.json $(GNOME_EXTENSION_BUILD)/$(GNOME_EXTENSION)/extension.js \
	  $(GNOME_EXTENSION_DIR)/$(GNOME_EXTENSION)/
	@if [ -z "$(DESTDIR)" ] && command -v update-desktop-database >/dev/null; then update-desktop-database -q $(SHARE_DIR)/applications || true; fi
	@if [ -z "$(DESTDIR)" ] && command -v gtk-update-icon-cache >/dev/null; then gtk-update-icon-cache -q -t $(SHARE_DIR)/icons/hicolor || true; fi
	@echo "Installed replay, replayd and replay-ui (replayd's system windows) in $(PREFIX)/bin; replayd's systemd user unit in $(UNIT_DIR);"
	@echo "the C API for apps (libopenreplaykit.so, openreplaykit.h, pkg-config openreplaykit) under $(PREFIX)/lib and $(PREFIX)/include;"
	@echo "the broadcast extensions ($(EXTENSIONS)) in $(EXTENSION_DIR);"
	@echo "the Screen Recording desktop entry and icon, man pages (man replay) and completions under $(SHARE_DIR);"
	@echo "the GNOME Shell extension ($(GNOME_EXTENSION_BUILD)) in $(GNOME_EXTENSION_DIR): on GNOME, each user enables it with"
	@echo "  gnome-extensions enable $(GNOME_EXTENSION)   (log out and in again first if GNOME does not know it yet)"
	@echo "replay starts replayd when needed; to keep it running instead: systemctl --user enable --now replayd"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/replay $(DESTDIR)$(PREFIX)/bin/replayd $(DESTDIR)$(PREFIX)/bin/replay-ui $(UNIT_DIR)/replayd.service
	rm -f $(SHARE_DIR)/applications/$(APP_ID).desktop $(SHARE_DIR)/icons/hicolor/scalable/apps/$(APP_ID).svg
	for size in $(ICON_SIZES); do rm -f $(SHARE_DIR)/icons/hicolor/$${size}x$${size}/apps/$(APP_ID).png; done
	rm -rf $(EXTENSION_DIR)/org.openreplaykit.rtmp.orkextension $(EXTENSION_DIR)/org.openreplaykit.rtmp.setup.orkextension $(EXTENSION_DIR)/org.openreplaykit.reference.orkextension
	rm -f $(MAN_DIR)/replay.1 $(MAN_DIR)/replayd.1 $(BASH_COMPLETION_DIR)/replay $(ZSH_COMPLETION_DIR)/_replay \
	  $(FISH_COMPLETION_DIR)/replay.fish
	rm -f $(LIB_DIR)/libopenreplaykit.so $(DESTDIR)$(PREFIX)/include/openreplaykit.h $(LIB_DIR)/pkgconfig/openreplaykit.pc
	rm -rf $(GNOME_EXTENSION_DIR)/$(GNOME_EXTENSION)

## icons: the PNG sizes of the icon, rendered from its SVG (librsvg2-bin's rsvg-convert); the PNGs
## are committed, so that building and installing need no renderer.
icons:
	for size in $(ICON_SIZES); do \
	  rsvg-convert -w $$size -h $$size dist/desktop/icons/$(APP_ID).svg -o dist/desktop/icons/$(APP_ID)-$$size.png || exit 1; \
	done

## bench: the benchmarks against ffmpeg (slow; never part of `make test`).
bench: bench-tools
	ORK_BIN_DIR=$(RELEASE_BIN) bash Benchmarks/run.sh

clean:
	rm -rf .build
