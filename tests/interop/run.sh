#!/usr/bin/env bash
# tests/interop/run.sh — run the rdma_rxe interop scenarios (docs/interop.md).
#
# Builds the guest image (a Debian kernel + an initramfs with rdma-core,
# perftest and busybox; cached in tests/interop/cache/ or
# $IRDMA_EMU_INTEROP_CACHE), boots it under QEMU in a private network
# namespace and runs the scenarios with go test, then prints a summary.
#
#   tests/interop/run.sh              all scenarios
#   tests/interop/run.sh -run 'Boot'  the scenarios matching a go test -run pattern
#   tests/interop/run.sh --fresh      build the image from an empty cache first
#                                     (a throwaway cache; measures a CI build)
#
# Needs root, /dev/net/tun and the Debian packages qemu-system-x86, kmod,
# xz-utils, iproute2, tcpdump and tshark (tests/run.sh installs them). The
# console log and capture of each guest are kept under
# $IRDMA_EMU_INTEROP_ARTIFACTS (default tests/interop/cache/artifacts).
set -euo pipefail
cd "$(dirname "$0")/../.."

run='.'
fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    -run) run="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="$PATH:/usr/local/go/bin"
fi
if [ "$(id -u)" != 0 ]; then
  echo "run.sh: the interop scenarios need root (namespaces, tap devices, apt-get download)" >&2
  exit 1
fi

cache="${IRDMA_EMU_INTEROP_CACHE:-$PWD/tests/interop/cache}"
if [ "$fresh" = 1 ]; then
  cache="$(mktemp -d /tmp/irdma-emu-interop-fresh.XXXXXX)"
  trap 'rm -rf "$cache"' EXIT
  echo "run.sh: building from an empty cache in $cache"
fi
export IRDMA_EMU_INTEROP_CACHE="$cache"
artifacts="${IRDMA_EMU_INTEROP_ARTIFACTS:-$PWD/tests/interop/cache/artifacts}"
mkdir -p "$artifacts"

log="$(mktemp /tmp/irdma-emu-interop.XXXXXX.log)"
start=$(date +%s)
set +e
go test -count=1 -v -timeout 30m -run "$run" -artifacts -outputdir "$artifacts" ./tests/interop/ 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
elapsed=$(( $(date +%s) - start ))

echo
echo "== interop summary"
grep -E '^(--- |    --- )(PASS|FAIL|SKIP)' "$log" || true
grep -E 'DURATION|RESULT|RXE RACE|first RoCEv2 packet|irdma-emu decode:' "$log" | sed -E 's/^ +[a-z_]+\.go:[0-9]+: /  /' || true
if grep -q 'interop guest tests SKIPPED' "$log"; then
  echo "run.sh: WARNING: scenarios were skipped (see above)"
fi
echo "run.sh: $( [ "$status" = 0 ] && echo passed || echo FAILED ) in ${elapsed}s (log: $log, artifacts: $artifacts)"
exit "$status"
