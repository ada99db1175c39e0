#!/usr/bin/env bash
# The project's test command (README.md): installs what the tests need,
# skipping what is present, then runs every test.
#
#   tests/run.sh            everything (unit, race, cross-process, interop)
#   tests/run.sh -short     unit tests only, no package installation
#
# rdma-core 65 is built first when it is not cached (tests/conformance:
# its programs, ibv_srq_pingpong among them, are tested on GEN_3);
# IRDMA_EMU_CONFORMANCE_CI=1 adds rdma-core's own test suite on GEN_2 and
# GEN_3, run last (docs/conformance.md "In CI"); off unless set (.ci/run).
#
# Runs as root on a fresh Debian machine (CI) or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
[ "${1:-}" = "-short" ] && short=1

# Debian packages the tests use: tshark judges our packets, tcpdump captures
# on real interfaces, nftables drops frames for loss tests, iproute2 makes
# namespaces and veth pairs; libibverbs-dev builds tests/programs/testdata.
pkgs=(tshark tcpdump nftables iproute2 qemu-system-x86 kmod xz-utils gcc libc6-dev ibverbs-utils ibverbs-providers libibverbs-dev perftest rdmacm-utils librdmacm1)
conformance="${IRDMA_EMU_CONFORMANCE_CI:-0}"
# rdma-core's build (tests/conformance/rdma-core.sh) and its suite.
pkgs+=(cmake ninja-build cython3 python3-dev libnl-3-dev libnl-route-3-dev pkg-config dpkg-dev debian-archive-keyring python3)

need=()
if [ "$short" = 0 ]; then
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
fi
if [ "${#need[@]}" -gt 0 ]; then
  echo "tests/run.sh: installing ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Every test that needs a program, a library or root now has it: from here
# on a missing dependency fails its test instead of skipping it
# (internal/testenv). Under CI=true that holds without this too.
[ "$short" = 0 ] && export IRDMA_EMU_DEPS_INSTALLED=1

if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="$PATH:/usr/local/go/bin"
fi
go version
go mod download

# rdma-core 65 and its own suite on GEN_2 and GEN_3 (docs/conformance.md
# "In CI"), in two steps: the build (rdma-core.sh: cached, or built),
# before the other tests, which use its programs too (always); the suite,
# after them (with the switch), once per profile, each judged against its
# own tests/conformance/known-<profile>.txt. It fails on any test that is
# neither OK, skipped by the suite itself, nor listed, and on any TIMEOUT
# or NOT RUN; it cannot hang: 60 s per test, 12 min for all tests of a
# profile, timeout(1) around the build (15 min) and each profile's go test
# (870 s = 14 min 30 s), so that with the ~10 min of the other tests CI ends
# within 60 min even when every limit is reached (10.5 + 15.5 + 2 x 15 = 56,
# the 30 s kill-after graces included); the arithmetic is in
# docs/conformance.md "In CI".
conformance_build() {
  local cstart dir
  cstart=$(date +%s)
  echo "== rdma-core 65 for tests/conformance"
  if ! dir=$(timeout --kill-after=30s 15m tests/conformance/rdma-core.sh); then
    echo "tests/run.sh: the rdma-core build failed"
    return 1
  fi
  echo "rdma-core in $dir ($(( $(date +%s) - cstart ))s)"
}

# conformance_profile PROFILE: the suite on one profile.
conformance_profile() {
  local profile=$1 cstart clog rc=0
  cstart=$(date +%s)
  echo "== rdma-core's own test suite on $profile (tests/conformance)"
  clog=$(mktemp "/tmp/irdma-emu-conformance-$profile.XXXXXX.log")
  IRDMA_EMU_CONFORMANCE=1 IRDMA_EMU_CONFORMANCE_PROFILE="$profile" IRDMA_EMU_CONFORMANCE_TIMEOUT=60s \
    IRDMA_EMU_CONFORMANCE_BUDGET=12m IRDMA_EMU_RDMA_CORE_OFFLINE=1 \
    timeout --kill-after=30s 870s go test -count=1 -v -timeout 14m -run '^TestRdmaCoreSuite$' ./tests/conformance/ >"$clog" 2>&1 || rc=$?
  grep -E '^== rdma-core|table: ' "$clog" || true
  if [ "$rc" != 0 ]; then
    echo "== conformance failures on $profile (full log: $clog)"
    grep -E '_test\.go:[0-9]+: |--- FAIL|^panic:|^FAIL|timed out' "$clog" | grep -v 'rdma-core.sh (' | head -100
    echo "tests/run.sh: rdma-core's suite on $profile FAILED after $(( $(date +%s) - cstart ))s"
    return 1
  fi
  echo "rdma-core's suite on $profile passed in $(( $(date +%s) - cstart ))s (log: $clog)"
}

# Both profiles run even when the first fails, so that one CI run shows
# both tables.
conformance_suite() {
  local rc=0
  conformance_profile gen2 || rc=1
  conformance_profile gen3 || rc=1
  return "$rc"
}

start=$(date +%s)
if [ "$short" = 0 ]; then
  conformance_build || exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test -race"
# -v into a log, so that every skipped test is listed below: a test that
# skips in CI (missing package, not root) must be seen, not hidden.
log=$(mktemp /tmp/irdma-emu-tests.XXXXXX.log)
args=(-race -count=1 -v)
[ "$short" = 1 ] && args+=(-short) || args+=(-timeout 45m)
rc=0
go test "${args[@]}" ./... >"$log" 2>&1 || rc=$?
grep -E '^(ok|FAIL|panic:)|^\s*--- FAIL' "$log" || true
# Every skip with its reason (the last message the test logged before it).
skips=$(awk '/^ *[^ ]+\.go:[0-9]+: /{last=$0; sub(/^ */, "", last)} /^ *--- SKIP: /{n=$0; sub(/^ *--- SKIP: /, "", n); print "  SKIP " n ": " last}' "$log")
nskip=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ -n "$skips" ]; then
  echo "== skipped tests ($nskip)"
  echo "$skips"
fi
# A skip for a missing dependency is a failure where the dependencies are
# required (internal/testenv fails such tests itself; this catches any
# that slipped past it).
if [ "$rc" = 0 ] && { [ "${CI:-}" = true ] || [ "${IRDMA_EMU_DEPS_INSTALLED:-}" = 1 ]; } &&
   grep -q 'MISSING DEPENDENCY:' "$log"; then
  echo "== tests skipped for a missing dependency although dependencies are required:"
  grep 'MISSING DEPENDENCY:' "$log"
  rc=1
fi
if [ "$rc" != 0 ]; then
  echo "== failures (full log: $log)"
  grep -n -B2 -A30 -E '^\s*--- FAIL|^panic:' "$log" | head -400
  echo "tests/run.sh: FAILED after $(( $(date +%s) - start ))s"
  exit "$rc"
fi
# The allocation tests skip under the race detector (its instrumentation
# allocates): run them once more without it.
echo "== allocation tests without -race"
go test -count=1 -run 'Alloc' ./...
if [ "$conformance" = 1 ] && [ "$short" = 0 ]; then
  conformance_suite || exit 1
fi
echo "tests/run.sh: passed in $(( $(date +%s) - start ))s ($nskip skipped, listed above; log: $log)"
