#!/usr/bin/env bash
# The project's test command (README.md): installs what the tests need,
# skipping what is present, then runs every test.
#
#   tests/run.sh            everything (unit, race, cross-process, interop)
#   tests/run.sh -short     unit tests only, no package installation
#
# Runs as root on a fresh Debian machine (CI) or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
[ "${1:-}" = "-short" ] && short=1

# Debian packages the tests use: tshark judges our packets, tcpdump captures
# on real interfaces, nftables drops frames for loss tests, iproute2 makes
# namespaces and veth pairs.
pkgs=(tshark tcpdump nftables iproute2 qemu-system-x86 kmod xz-utils gcc libc6-dev ibverbs-utils ibverbs-providers perftest)

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

if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="$PATH:/usr/local/go/bin"
fi
go version
go mod download

start=$(date +%s)
echo "== go vet"
go vet ./...
echo "== go test -race"
if [ "$short" = 1 ]; then
  go test -short -race -count=1 ./...
else
  go test -race -count=1 -timeout 45m ./...
fi
echo "tests/run.sh: passed in $(( $(date +%s) - start ))s"
