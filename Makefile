# OpenReplayKit — the two commands a new user runs: `make demo` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
DEBUG_BIN := $(CURDIR)/.build/debug
RELEASE_BIN := $(CURDIR)/.build/release

.PHONY: all bootstrap build release-cli release bench-tools test demo bench install uninstall clean

all: build

## bootstrap: install the system packages (Debian 12, as root; idempotent).
bootstrap:
	@bash scripts/bootstrap.sh

## build: debug build of everything.
build: bootstrap
	$(SWIFT) build

## release-cli: release builds of the two programs a user runs (`make install` needs only these).
release-cli: bootstrap
	$(SWIFT) build -c release --product replayd
	$(SWIFT) build -c release --product replay

release: release-cli
	$(SWIFT) build -c release --product replay-testcontent
	$(SWIFT) build -c release --product broadcast-service

bench-tools: release
	$(SWIFT) build -c release --product replay-bench

## test: install what tests need, build, run every test (unit, in-process C, whole system).
## The screen-recording system tests run on their own: they measure frames and sound timing, and
## sharing 2 cores with the browser and ffmpeg of the service tests would make them flaky.
test: bootstrap
	@mkdir -p .build
	set -o pipefail; $(SWIFT) build --build-tests 2>&1 | tee .build/build-tests.log
	@if grep -E '^$(CURDIR)/(Sources|Tests|Benchmarks)/[^ ]+: warning:' .build/build-tests.log; then \
	  echo "make test: the build above has warnings in our code (the house rule is none): fix them"; exit 1; fi
	ORK_BIN_DIR=$(DEBUG_BIN) $(SWIFT) test --skip-build --skip '^SystemTests\.'
	ORK_BIN_DIR=$(DEBUG_BIN) $(SWIFT) test --skip-build --filter '^SystemTests\.'

## demo: record 10 s of the screen (a virtual display with moving content and sound when there is none).
demo: release
	ORK_BIN_DIR=$(RELEASE_BIN) bash scripts/demo.sh

## install: `replay` and `replayd` (release builds) into $(PREFIX)/bin, and replayd's systemd user
## unit into $(PREFIX)/lib/systemd/user (a folder systemd reads for every user). As root.
PREFIX ?= /usr/local
UNIT_DIR := $(DESTDIR)$(PREFIX)/lib/systemd/user
install: release-cli
	install -d $(DESTDIR)$(PREFIX)/bin $(UNIT_DIR)
	install -m 755 $(RELEASE_BIN)/replay $(RELEASE_BIN)/replayd $(DESTDIR)$(PREFIX)/bin/
	sed 's|@BINDIR@|$(PREFIX)/bin|' dist/systemd/replayd.service > $(UNIT_DIR)/replayd.service
	chmod 644 $(UNIT_DIR)/replayd.service
	@echo "Installed replay and replayd in $(PREFIX)/bin; replayd's systemd user unit in $(UNIT_DIR)."
	@echo "replay starts replayd when needed; to keep it running instead: systemctl --user enable --now replayd"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/replay $(DESTDIR)$(PREFIX)/bin/replayd $(UNIT_DIR)/replayd.service

## bench: the benchmarks against ffmpeg (slow; never part of `make test`).
bench: bench-tools
	ORK_BIN_DIR=$(RELEASE_BIN) bash Benchmarks/run.sh

clean:
	rm -rf .build
