#!/bin/sh
# SPDX-License-Identifier: MIT
# install-consumer.sh - cmake --install into a temporary prefix, then build and run C and C++ consumers through pkg-config, shared and static.
#
# Usage: tests/install-consumer.sh SOURCE_DIR BUILD_DIR CC CXX [EXTRA_CFLAGS]
# EXTRA_CFLAGS: e.g. -fsanitize=address,undefined when the library was built so.
set -u

src=$1 build=$2 cc=$3 cxx=$4 extra=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log"; echo "install-consumer: cmake --install failed"; exit 1; }

pcdir=$(dirname "$(find "$prefix" -name probekit.pc | head -n 1)")
[ -f "$pcdir/probekit.pc" ] || { echo "install-consumer: no probekit.pc installed"; exit 1; }
for f in include/probekit.h $(cd "$src" && echo include/probekit/*.h); do
	[ -f "$prefix/$f" ] || { echo "install-consumer: $f not installed"; exit 1; }
done

export PKG_CONFIG_PATH="$pcdir"
flags=$(pkg-config --cflags --libs probekit) || {
	echo "install-consumer: pkg-config probekit failed"; exit 1; }
libdir=$(pkg-config --variable=libdir probekit)
echo "pkg-config --cflags --libs probekit: $flags"
case "$flags" in *"$prefix"*) ;; *)
	echo "install-consumer: flags do not point into the install prefix $prefix"; exit 1 ;;
esac

# Static linking as README "Installing" gives it: libprobekit.a into the
# program, its dependencies shared. The program must not need libprobekit.so
# and must run without an rpath to it.
static_flags=$(pkg-config --static --libs probekit)
echo "pkg-config --static --libs probekit: $static_flags"

fail=0
build_run() { # $1: shared or static, $2: compiler, $3: std, $4: source
	how=$1
	shift
	exe=$tmp/$how-$(basename "$3")
	if [ "$how" = static ]; then
		link="$(pkg-config --cflags probekit) -Wl,-Bstatic $static_flags"
	else
		link="$flags -Wl,-rpath,$libdir"
	fi
	# shellcheck disable=SC2086 # $extra and $link are lists of flags
	if ! "$1" "$2" -Wall -Wextra -Werror $extra "$3" -o "$exe" $link; then
		echo "install-consumer: $3 does not build against the installed probekit ($how)"
		fail=1
		return
	fi
	if [ "$how" = static ] && readelf -d "$exe" | grep -q 'NEEDED.*libprobekit'; then
		echo "install-consumer: static $(basename "$3") still needs libprobekit.so"
		fail=1
	elif "$exe"; then
		echo "install-consumer: $how $(basename "$3") ok"
	else
		echo "install-consumer: $how $(basename "$3") failed (exit $?)"
		fail=1
	fi
}
for how in shared static; do
	build_run $how "$cc" -std=c11 "$src/tests/consumer/consumer.c"
	build_run $how "$cxx" -std=c++17 "$src/tests/consumer/consumer.cc"
done

# The installed command finds its installed agent (not the build tree's).
case "$extra" in *sanitize*)
	echo "install-consumer: probekit count not run: sanitizer build (the agent needs the ASan runtime loaded first)" ;;
*)
	if [ ! -x "$prefix/bin/probekit" ]; then
		echo "install-consumer: bin/probekit not installed"; fail=1
	elif ! "$prefix/bin/probekit" count -p malloc -- sh -c 'echo hi' >"$tmp/pk.out" 2>"$tmp/pk.err" ||
	     ! grep -Eq '^ +[1-9][0-9]*  malloc$' "$tmp/pk.err"; then
		cat "$tmp/pk.err"; echo "install-consumer: installed probekit count failed"; fail=1
	else
		echo "install-consumer: installed probekit count ok"
	fi ;;
esac
[ -f "$prefix/share/man/man1/probekit.1" ] || { echo "install-consumer: probekit.1 not installed"; fail=1; }
# The installed pages, aliases included, render as they do in the tree.
"$src/tests/check-man.sh" "$prefix/share/man" > "$tmp/man.out"
case $? in
0) echo "install-consumer: installed man pages ok: $(tail -n 1 "$tmp/man.out")" ;;
77) echo "install-consumer: installed man pages not checked: $(cat "$tmp/man.out")" ;;
*) cat "$tmp/man.out"; echo "install-consumer: installed man pages do not render"; fail=1 ;;
esac
exit $fail
