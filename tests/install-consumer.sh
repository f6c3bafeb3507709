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

fail=0
build_run() { # $1: compiler, $2: std, $3: source
	exe=$tmp/$(basename "$3")
	# shellcheck disable=SC2086 # $flags and $extra are lists of flags
	if ! "$1" "$2" -Wall -Wextra -Werror $extra "$3" -o "$exe" $flags -Wl,-rpath,"$libdir"; then
		echo "install-consumer: $3 does not build against the installed probekit"
		fail=1
		return
	fi
	if "$exe"; then
		echo "install-consumer: $(basename "$3") ok"
	else
		echo "install-consumer: $(basename "$3") failed (exit $?)"
		fail=1
	fi
}
build_run "$cc" -std=c11 "$src/tests/consumer/consumer.c"
build_run "$cxx" -std=c++17 "$src/tests/consumer/consumer.cc"

# Static linking as README "Installing" gives it: libprobekit.a into the
# program, its dependencies shared. The program must not need libprobekit.so
# and must run without an rpath to it.
static_flags=$(pkg-config --static --libs probekit)
echo "pkg-config --static --libs probekit: $static_flags"
build_run_static() { # $1: compiler, $2: std, $3: source
	exe=$tmp/static-$(basename "$3")
	# shellcheck disable=SC2086 # lists of flags
	if ! "$1" "$2" -Wall -Wextra -Werror $extra "$3" -o "$exe" \
	     $(pkg-config --cflags probekit) -Wl,-Bstatic $static_flags; then
		echo "install-consumer: $3 does not link with libprobekit.a (README's static link)"
		fail=1
		return
	fi
	if readelf -d "$exe" | grep -q 'NEEDED.*libprobekit'; then
		echo "install-consumer: static $(basename "$3") still needs libprobekit.so"
		fail=1
	elif "$exe"; then
		echo "install-consumer: static $(basename "$3") ok"
	else
		echo "install-consumer: static $(basename "$3") failed (exit $?)"
		fail=1
	fi
}
build_run_static "$cc" -std=c11 "$src/tests/consumer/consumer.c"
build_run_static "$cxx" -std=c++17 "$src/tests/consumer/consumer.cc"

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
