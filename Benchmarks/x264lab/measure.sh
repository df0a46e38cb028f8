#!/bin/bash
# measure.sh PICTURES NAME OPTIONS [THREADS] [CROP]: encodes PICTURES (written by a build with
# dump-pictures.patch) again with `replay-bench reencode` and libx264's OPTIONS, and prints its
# bytes, its P pictures' bytes per changed macroblock, and the SSIM and PSNR of every decoded picture
# against the picture handed in, of all of it and of CROP (W:H:X:Y). MEASURE_IR=1: also libx264's
# instructions, counted by callgrind on one thread. Uses .build/release/replay-bench (ORK_BIN_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${ORK_BIN_DIR:-$here/../../.build/release}
pictures=$1 name=$2 options=$3 threads=${4:-3} crop=${5:-}
work=${X264LAB_WORK:-/tmp/x264lab}
mkdir -p "$work"
ref="$work/$(basename "$pictures").yuv"
[ -e "$ref" ] || "$bin/replay-bench" reencode "$pictures" -o /dev/null --threads 1 --reference "$ref" >/dev/null
line=$("$bin/replay-bench" reencode "$pictures" -o "$work/$name.264" --threads "$threads" --options "$options")
quality() {  # quality [CROP]: mean SSIM and PSNR, picture by picture (the n-th decoded against the
  # n-th handed in, on whole ticks of 1/30 s: N/30/TB in seconds rounds some down onto their neighbour)
  local c=${1:+crop=$1,}
  ffmpeg -nostdin -v error -i "$work/$name.264" -s 1920x1080 -pix_fmt yuv420p -f rawvideo -i "$ref" -lavfi \
    "[0:v]${c}settb=1/30,setpts=N[a];[1:v]${c}settb=1/30,setpts=N[b];[a]split[a1][a2];[b]split[b1][b2];[a1][b1]ssim=stats_file=$work/ssim;[a2][b2]psnr=stats_file=$work/psnr" -f null -
  awk '{split($5,a,":"); s+=a[2]; n++} END {printf "SSIM %.6f ", s/n}' "$work/ssim"
  awk '{for(i=1;i<=NF;i++) if ($i ~ /^psnr_avg:/) {split($i,a,":"); s+=a[2]; n++}} END {printf "PSNR %.2f dB", s/n}' "$work/psnr"
}
echo "$name [$options] $line | all: $(quality)${crop:+ | $crop: $(quality "$crop")}"
if [ "${MEASURE_IR:-0}" = 1 ]; then
  echo "$name instructions: $(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin/replay-bench" reencode "$pictures" -o /dev/null --threads 1 --options "$options" 2>&1 | sed -n 's/.*Collected : //p')"
fi
