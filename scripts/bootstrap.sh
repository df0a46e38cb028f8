#!/usr/bin/env bash
# Installs every system package OpenReplayKit needs to build, test and run its demo.
# Idempotent: safe to run again; it only installs what is missing. Needs root (or sudo).
set -euo pipefail

BUILD_PACKAGES=(
  pkg-config
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev libx264-dev libyuv-dev
  libxcb1-dev libxcb-shm0-dev libxcb-xfixes0-dev libxcb-damage0-dev libxcb-randr0-dev
  libxcb-composite0-dev libxcb-shape0-dev libxcb-res0-dev
  libcairo2-dev
  libpulse-dev
  libsqlite3-dev
  libgtk-4-dev
  libsecret-1-dev   # RPAppGroup: the Secret Service
  libpipewire-0.3-dev   # Wayland: the portal's PipeWire stream (pulls libspa-0.2-dev)
)
TEST_PACKAGES=(
  xvfb x11-utils x11-xserver-utils xdotool openbox
  libgtk-4-media-gstreamer gstreamer1.0-plugins-good gstreamer1.0-libav gstreamer1.0-pulseaudio
  pulseaudio pulseaudio-utils sox
  ffmpeg
  nginx-light libnginx-mod-rtmp
  chromium fonts-dejavu-core curl
  desktop-file-utils
  gnome-keyring libsecret-tools dbus-bin   # RPAppGroupTests: a Secret Service on a private session bus
  postgresql haproxy   # haproxy: scripts/cluster.sh, three nodes behind one balancer
  gcc python3   # SystemTests.CAPITests: cc compiles a C app against libopenreplaykit.so; ctypes
  # Wayland: headless GNOME Shell with its portal and PipeWire (docs/WAYLAND.md); sway for the refusal tests
  pipewire pipewire-bin pipewire-pulse wireplumber xdg-desktop-portal xdg-desktop-portal-gnome
  gnome-shell mutter xwayland python3-pyatspi python3-gi gir1.2-gtk-4.0 at-spi2-core
  sway xdg-desktop-portal-wlr
  gjs gstreamer1.0-pipewire   # make bench: GNOME Shell's own screen recorder, the Wayland peer
  gdb   # a replay command that hangs in a test: replayd's threads' stacks in the failure (TestEnvironment.replaydThreads)
)

want=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#want[@]} system packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "bootstrap: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
