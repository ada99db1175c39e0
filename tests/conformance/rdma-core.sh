#!/usr/bin/env bash
# tests/conformance/rdma-core.sh — fetch and build upstream rdma-core (the
# second provider generation, docs/conformance.md), cached.
#
#   tests/conformance/rdma-core.sh          fetch + build if needed; prints the build directory
#   tests/conformance/rdma-core.sh --check  print the build directory if it is cached, else fail
#
# The source is the newest rdma-core source package Debian sid offers (the
# archive drops a version when sid moves on, so none is pinned), fetched with
# `apt-get source --download-only` through a private apt configuration (its
# own sources list naming sid's deb-src, its own lists and caches: the
# machine's apt state is not touched). The chain of trust is Debian's: the
# Release file is signed (debian-archive-keyring), it hashes Sources, Sources
# hashes the .dsc, and the .dsc hashes the upstream tarball — this script
# checks the last link itself. The upstream tarball (not Debian's patches)
# is built: it is upstream's libirdma that is judged. A version without
# IRDMA_GEN_3 in providers/irdma is refused.
#
# Built with bookworm's toolchain (cmake, ninja-build, cython3, python3-dev,
# libnl-3-dev, libnl-route-3-dev, pkg-config, gcc), no man pages, at
# `nice -n 10` with 2 jobs (IRDMA_EMU_JOBS overrides); only the targets the
# suite and the tests use, pyverbs at -O0 -g0 (below). The result stays in
#
#   $CACHE/rdma-core/<version>/build     (bin/, lib/, python/pyverbs, tests via the source)
#   $CACHE/rdma-core/<version>/src       (the source tree; tests/run_tests.py)
#   $CACHE/rdma-core/<version>/BUILT     (written last: version, tarball sha256, date)
#
# with $CACHE = $IRDMA_EMU_CONFORMANCE_CACHE, else $IRDMA_EMU_CACHE_DIR, else
# $XDG_CACHE_HOME/irdma-emu (~/.cache/irdma-emu) — the preload's cache
# (preload.CacheDir). A new version in sid builds a new directory; older
# ones are removed once the new one is complete. Idempotent: a cached build
# of the offered version costs one `apt-get update` of sid's Sources
# (IRDMA_EMU_RDMA_CORE_OFFLINE=1 skips even that and uses the newest cached
# build).
set -euo pipefail

check=0
[ "${1:-}" = "--check" ] && check=1

cache="${IRDMA_EMU_CONFORMANCE_CACHE:-${IRDMA_EMU_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/irdma-emu}}"
root="$cache/rdma-core"
mkdir -p "$root"
jobs="${IRDMA_EMU_JOBS:-2}"
log() { echo "rdma-core.sh: $*" >&2; }

# check_build DIR: the outputs the suite and the tests use are there.
check_build() {
  local b="$1/build" f
  for f in lib/libibverbs.so.1 lib/librdmacm.so.1 'lib/libirdma-rdmav*.so' etc/libibverbs.d/irdma.driver \
    'python/pyverbs/device.cpython-*.so' 'python/pyverbs/providers/mlx5/mlx5dv.cpython-*.so' \
    'python/pyverbs/providers/efa/efadv.cpython-*.so' bin/run_tests.py \
    bin/ibv_devinfo bin/ibv_rc_pingpong bin/ibv_ud_pingpong bin/ibv_srq_pingpong bin/rping bin/ucmatose; do
    # shellcheck disable=SC2086
    compgen -G "$b/$f" >/dev/null || { log "$1 lacks $f"; return 1; }
  done
}

newest_cached() {
  # Directory names are versions; sort -V picks the newest complete one.
  local f
  for f in "$root"/*/BUILT; do
    [ -e "$f" ] && check_build "$(dirname "$f")" && dirname "$f"
  done | sort -V | tail -1
}

if [ "$check" = 1 ] || [ "${IRDMA_EMU_RDMA_CORE_OFFLINE:-}" = 1 ]; then
  d="$(newest_cached)"
  if [ -z "$d" ]; then
    log "no cached rdma-core build under $root (run tests/conformance/rdma-core.sh)"
    exit 1
  fi
  echo "$d"
  exit 0
fi

# One build at a time per cache (two test runs may start together).
exec 9>"$root/.lock"
flock 9

# --- the private apt configuration: sid's deb-src only -------------------
apt="$root/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d" "$apt/etc/sources.list.d"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$apt/etc/sources.list" <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian sid main
EOF
aptopts=(
  -o "Dir::Etc::SourceList=$apt/etc/sources.list"
  -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
  -o "Dir::Etc::Preferences=$apt/etc/preferences"
  -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
  -o "Dir::State::Lists=$apt/lists"
  -o "Dir::Cache=$apt/cache"
  -o "Dir::Cache::pkgcache="
  -o "Dir::Cache::srcpkgcache="
  -o "APT::Sandbox::User=root"
  -o "Acquire::Languages=none"
  -o "Debug::NoLocking=1"
)
log "apt-get update (sid deb-src, private lists in $apt)"
apt-get "${aptopts[@]}" -qq update >&2
version="$(apt-cache "${aptopts[@]}" showsrc rdma-core | awk '/^Version:/{print $2}' | sort -V | tail -1)"
if [ -z "$version" ]; then
  log "sid offers no rdma-core source"
  exit 1
fi
upstream="${version#*:}"
upstream="${upstream%-*}"
dir="$root/$upstream"
if [ -e "$dir/BUILT" ] && check_build "$dir"; then
  log "rdma-core $upstream (Debian $version) is cached in $dir"
  echo "$dir"
  exit 0
fi

log "building rdma-core $upstream (Debian $version) in $dir"
rm -rf "$dir"
mkdir -p "$dir/dl"
# apt-get source verifies every file against the signed Sources index. A
# mirror can lag behind its own index (seen: sid's Sources naming
# rdma-core_65.0-1.1.dsc while the pool held only 65.0-1's .dsc and the
# shared upstream tarball); then each file is fetched alone with apt's
# downloader, which checks it against the same Sources hash, and only the
# upstream tarball is required.
if ! (cd "$dir/dl" && apt-get "${aptopts[@]}" -qq source --download-only "rdma-core=$version" >&2); then
  log "apt-get source failed; fetching the files one by one against the Sources hashes"
  apt-get "${aptopts[@]}" -qq --print-uris source "rdma-core=$version" | grep "^'" |
  while read -r uri name size hash; do
    uri="${uri//\'/}"
    /usr/lib/apt/apt-helper "${aptopts[@]}" -qq download-file "$uri" "$dir/dl/$name" "$hash" >&2 ||
      log "could not fetch $name ($uri)"
  done
fi
orig="$(ls "$dir"/dl/rdma-core_"$upstream".orig.tar.* 2>/dev/null || true)"
if [ -z "$orig" ]; then
  log "the archive did not give rdma-core_$upstream.orig.tar.*"
  exit 1
fi
got="$(sha256sum "$orig" | cut -d' ' -f1)"
# The Sources stanza (signed through Release) hashes the tarball; so does
# the .dsc when the mirror has it: both must agree with the file.
sources_sha="$(apt-cache "${aptopts[@]}" showsrc rdma-core | awk -v v="$version" -v f="$(basename "$orig")" '
  /^Package:/{p=0} /^Version:/{p=($2==v)} /^Checksums-Sha256:/{s=1; next} /^[^ ]/{s=0}
  p && s && $3==f {print $1; exit}')"
if [ "$sources_sha" != "$got" ]; then
  log "checksum mismatch for $(basename "$orig"): Sources says '$sources_sha', file is $got"
  exit 1
fi
dsc="$(ls "$dir"/dl/rdma-core_"${version#*:}".dsc 2>/dev/null || true)"
if [ -n "$dsc" ]; then
  want="$(awk -v f="$(basename "$orig")" '/^Checksums-Sha256:/{s=1; next} /^[^ ]/{s=0} s && $3==f {print $1}' "$dsc")"
  if [ "$want" != "$got" ]; then
    log "checksum mismatch for $(basename "$orig"): $(basename "$dsc") says '$want', file is $got"
    exit 1
  fi
  log "$(basename "$orig") sha256 $got matches $(basename "$dsc") and Sources"
  checked="$(basename "$dsc") and Sources"
else
  log "$(basename "$orig") sha256 $got matches sid's Sources (the mirror has no $version .dsc)"
  checked="Sources (no .dsc on the mirror)"
fi

mkdir -p "$dir/src"
tar -xf "$orig" -C "$dir/src" --strip-components=1
if ! grep -rqs IRDMA_GEN_3 "$dir/src/providers/irdma/"; then
  log "rdma-core $upstream has no IRDMA_GEN_3 in providers/irdma: refusing it"
  exit 1
fi

mkdir -p "$dir/build"
# NO_MAN_PAGES: no pandoc/rst2man. IN_PLACE: the programs, libibverbs and
# pyverbs run from the build directory (providers and libibverbs.d found
# there, not under /usr/local). IOCTL_MODE=both is the default: the
# preload answers ioctl with ENOTTY and libibverbs falls back to write().
# Debian's toolchain and Debian's python3 (its cython3 module), whatever
# else the caller's PATH holds (a pyenv python has no Cython: pyverbs would
# be disabled without a word).
#
# Only what the suite and the tests run is built (targets below): the
# libraries that are judged — libibverbs, the irdma provider, librdmacm —
# at RelWithDebInfo (-O2 -g) as upstream's default; pyverbs and the
# providers its mlx5 and efa modules link (the suite imports every test
# module, those of other vendors too, which then skip); the example
# programs of libibverbs and librdmacm. Not built: the other providers,
# ibacm, iwpmd, infiniband-diags, libibumad/libibmad/libibnetdisc,
# srp_daemon, rdma-ndd, the rsocket preload. pyverbs, the test harness
# and not a judged library, is compiled at -O0 -g0 (harness-cc): its
# Cython-generated C is most of the build's compile time at -O2 -g.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
here="$(cd "$(dirname "$0")" && pwd)"
(cd "$dir/build" && nice -n 10 cmake -GNinja -DNO_MAN_PAGES=1 \
  -DIN_PLACE=1 -DPYTHON_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER_LAUNCHER="$here/harness-cc" "$dir/src" >"$dir/cmake.log" 2>&1) || {
  log "cmake failed:"; tail -40 "$dir/cmake.log" >&2; exit 1; }
mapfile -t targets < <(cd "$dir/build" && ninja -t targets all | sed 's/:.*//' | grep -E \
  -e '^lib/lib(ibverbs|rdmacm)\.so(\.[0-9]+)*$' \
  -e '^lib/libirdma-rdmav[0-9]+\.so$' \
  -e '^python/.*\.so$' \
  -e '^bin/ibv_[a-z_]+$' \
  -e '^bin/(rping|ucmatose|udaddy|mckey|cmtime|rdma_client|rdma_server|rdma_xclient|rdma_xserver|rcopy|riostream|rstream|udpong)$' |
  sort -u)
log "${#targets[@]} ninja targets"
(cd "$dir/build" && nice -n 10 ninja -j"$jobs" "${targets[@]}" >"$dir/ninja.log" 2>&1) || {
  log "build failed:"; grep -m20 -B2 -A10 'error' "$dir/ninja.log" >&2 || tail -40 "$dir/ninja.log" >&2; exit 1; }
# libibverbs.d names every provider cmake knows; libibverbs 65 dlopens each
# one it names and warns on stderr for a missing one: name only the built
# (cmake made the providers' lib*-rdmav*.so links; -e follows them).
for f in "$dir"/build/etc/libibverbs.d/*.driver; do
  lib="$(awk '/^driver /{print $2}' "$f")"
  built=0
  for so in "$lib"-rdmav*.so; do [ -e "$so" ] && built=1; done
  [ "$built" = 1 ] || rm -f "$f"
done
check_build "$dir" || exit 1
printf 'version %s\ndebian %s\nsha256 %s\nchecked %s\nbuilt %s\n' "$upstream" "$version" "$got" "$checked" "$(date -u +%FT%TZ)" >"$dir/BUILT.tmp"
mv "$dir/BUILT.tmp" "$dir/BUILT"
rm -rf "$dir/dl"
# Older versions are not used any more.
for old in "$root"/*/; do
  old="${old%/}"
  [ "$old" = "$dir" ] || [ "$(basename "$old")" = apt ] || rm -rf "$old"
done
log "rdma-core $upstream built"
echo "$dir"
