#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# mpich-build.sh - build MPICH with the ch4 device and its OFI netmod on
# Debian's libfabric, the engine Intel MPI is built on, into a cache, so
# test/mpi/run_mpich_tests.sh can run the project's MPI programs over opx
# the way Intel MPI would drive it.  Debian's own mpich package is built
# for UCX (ch4:ucx) and never calls libfabric, hence this build.
#
# Usage: bash scripts/mpich-build.sh [--force]
#   --force       rebuild even when the cache holds a matching build
# Environment:
#   OPX_MPICH_DIR  the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/opx-mpich):
#                  src/ (Debian's source package), build/, install/
#                  (bin/mpicc, bin/mpiexec ...) and the stamp install/.opx-stamp
#   OPX_JOBS       make -j (default 2)
#   OPX_NO_APT=1   never call apt-get (the source and packages are there)
#
# Idempotent: a cache whose stamp names the same MPICH version and the same
# configure arguments is left alone (exit 0 at once).  What it does and how
# long each step took is printed; the build competes with whatever else
# runs on the machine, so the times are those of this run only.
set -euo pipefail

MPICH_VERSION=4.0.2
DIR=${OPX_MPICH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opx-mpich}
JOBS=${OPX_JOBS:-2}
# ch4 with the OFI netmod on the system libfabric (so opx loads from
# FI_PROVIDER_PATH like any other provider) and MPICH's own posix shared
# memory beside it (MPIR_CVAR_NOLOCAL=1 sends on-host traffic through
# opx).  Kept short: no Fortran, C++, ROMIO, docs; the dataloop datatype
# engine instead of yaksa (whose generated pack kernels are most of
# MPICH's compile time); the system hwloc, not the embedded one.
CONFIGURE_ARGS=(--with-device=ch4:ofi --with-libfabric=/usr --without-ucx
	--with-hwloc=/usr --disable-fortran --disable-cxx --disable-romio
	--disable-doc --with-datatype-engine=dataloop --enable-fast=O2
	--enable-shared --disable-static)
# MPICH links libmpi with "pkg-config --static --libs libfabric", so the
# libraries Debian's libfabric was built with need their -dev symlinks.
PACKAGES=(gcc make libfabric-dev libhwloc-dev dpkg-dev xz-utils
	libpsm2-dev libpsm-infinipath1-dev librdmacm-dev libibverbs-dev)

log() { printf '==> %s\n' "$*"; }
die() { echo "mpich-build.sh: $*" >&2; exit 1; }

force=0
case ${1:-} in
--force) force=1 ;;
'') ;;
*) die "usage: mpich-build.sh [--force]" ;;
esac

install=$DIR/install
stamp=$install/.opx-stamp
want="mpich $MPICH_VERSION ${CONFIGURE_ARGS[*]}"
mkdir -p "$DIR"
# One build at a time per cache: a second caller waits, then finds it done.
exec 9>"$DIR/.lock"
flock 9

if [ $force = 0 ] && [ -x "$install/bin/mpicc" ] && [ -f "$stamp" ] &&
   [ "$(cat "$stamp")" = "$want" ]; then
	log "MPICH $MPICH_VERSION (ch4:ofi) already built in $install"
	exit 0
fi

t_all=$(date +%s)
step_start=$t_all
step_end() {
	local now
	now=$(date +%s)
	log "$1 took $((now - step_start)) s"
	step_start=$now
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root or sudo to run: $*"
	fi
}

# Debian 12 ships no deb-src entry by default; add one beside the deb
# entries (same mirror, same keyring) in a file of our own.
enable_deb_src() {
	local f=/etc/apt/sources.list.d/opx-deb-src.sources uri
	[ -e "$f" ] && return 0
	uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
	[ -n "$uri" ] || uri=http://deb.debian.org/debian
	log "adding deb-src for bookworm ($uri) in $f"
	printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: %s\n' \
		"$uri" /usr/share/keyrings/debian-archive-keyring.gpg | as_root tee "$f" >/dev/null
	as_root apt-get update -q
}

if [ "${OPX_NO_APT:-0}" != 1 ]; then
	missing=()
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing: ${missing[*]}"
		as_root apt-get update -q
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}"
	fi
fi

src=$DIR/src/mpich-$MPICH_VERSION
if [ ! -x "$src/configure" ]; then
	[ "${OPX_NO_APT:-0}" = 1 ] && die "no source in $src and OPX_NO_APT=1"
	if ! apt-cache showsrc mpich 2>/dev/null | grep -q "^Version: $MPICH_VERSION-"; then
		enable_deb_src
	fi
	ver=$(apt-cache showsrc mpich | sed -n "s/^Version: \($MPICH_VERSION-.*\)/\1/p" | head -n 1)
	[ -n "$ver" ] || die "Debian offers no mpich $MPICH_VERSION source package"
	log "fetching Debian's source package mpich=$ver"
	rm -rf "$DIR/src"
	mkdir -p "$DIR/src"
	# _apt cannot write to a root-only cache; as root apt falls back to
	# downloading unsandboxed and says so, which is harmless here.
	(cd "$DIR/src" && apt-get source -q "mpich=$ver" 2>&1 | grep -v '^W: Download is performed unsandboxed') ||
		die "apt-get source mpich=$ver failed"
	[ -x "$src/configure" ] || die "no $src/configure after apt-get source"
	step_end "fetching the source"
fi

build=$DIR/build
rm -rf "$build" "$install"
mkdir -p "$build"
log "configure: ${CONFIGURE_ARGS[*]} --prefix=$install"
(cd "$build" && "$src/configure" "${CONFIGURE_ARGS[@]}" --prefix="$install" \
	>configure.log 2>&1) || { tail -n 30 "$build/configure.log"; die "configure failed: $build/configure.log"; }
step_end "configure"
log "make -j$JOBS (log: $build/make.log)"
(cd "$build" && make -j"$JOBS" >make.log 2>&1) ||
	{ grep -m 20 -E 'error|Error' "$build/make.log"; die "make failed: $build/make.log"; }
step_end "make"
(cd "$build" && make install >install.log 2>&1) || die "make install failed: $build/install.log"
step_end "make install"
"$install/bin/mpichversion" | head -n 3
printf '%s\n' "$want" >"$stamp"
log "MPICH $MPICH_VERSION (ch4:ofi) in $install, $(( $(date +%s) - t_all )) s in all"
