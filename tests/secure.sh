#!/bin/sh
# SPDX-License-Identifier: MIT
# secure.sh BUILD_DIR SOURCE_DIR - a set-user-ID program linked with libprobekit ignores every PROBEKIT_* variable, and the installed library has no test hooks.
#
# 1. The library that installs has none of the test-only hooks
#    (PROBEKIT_TEST_*); the tests' copy in testlib/ has them (so this check
#    can fail).
# 2. secure_target, linked with that library, is run by an ordinary user
#    (nobody) with PROBEKIT_LOG=debug and PROBEKIT_PROBE_SIGNAL set: as a
#    plain program the variables take effect (the check can fail); set-user-ID
#    root, in a secure-execution process (AT_SECURE), they must not: no
#    message printed, and the probe registers with the default signal.
set -u
build=$1
src=$2
lib=$build/libprobekit.so.0
testlib=$build/testlib/libprobekit.so.0
fail=0

bad() {
	echo "FAIL: $*"
	fail=1
}

if grep -aq 'PROBEKIT_TEST_\|TEST_MAPS_READ' "$lib"; then
	bad "the installed library has test hooks: $(grep -ao 'PROBEKIT_TEST_[A-Z_]*\|TEST_MAPS_READ' "$lib" | sort -u | tr '\n' ' ')"
fi
grep -aq PROBEKIT_TEST_FAIL_WRITE "$testlib" ||
	bad "the tests' copy of the library has no test hooks (so check 1 proves nothing)"

skip() {
	echo "SKIP: $*"
	[ $fail = 0 ] && exit 77
	exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root to make a set-user-ID program"
command -v setpriv >/dev/null || skip "no setpriv(1) to run as another user"
command -v cc >/dev/null || skip "no C compiler"
readelf -d "$lib" | grep -q 'NEEDED.*lib[at]san' &&
	skip "the library is built with a sanitizer, whose runtime a set-user-ID program cannot load"

d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
chmod 755 "$d"
cp -L "$lib" "$d/" || exit 1
# An absolute run path: a secure-execution process ignores $ORIGIN and
# LD_LIBRARY_PATH.
cc -I"$src/include" "$src/tests/secure_target.c" -o "$d/prog" \
	"$d/libprobekit.so.0" -Wl,-rpath,"$d" || exit 1

# run OUT ERR VAR=VAL...: prog as nobody, with the variables.
run() {
	out=$1
	err=$2
	shift 2
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env "$@" "$d/prog" >"$out" 2>"$err"
}

run "$d/plain.out" "$d/plain.err"
run "$d/log.out" "$d/log.err" PROBEKIT_LOG=debug
run "$d/bad.out" "$d/bad.err" PROBEKIT_PROBE_SIGNAL=1
run "$d/sig.out" "$d/sig.err" PROBEKIT_PROBE_SIGNAL=50
echo "plain program:"
cat "$d/plain.out" "$d/log.err" "$d/bad.out" "$d/sig.out"
grep -q 'register=0 .*calls=3' "$d/plain.out" || bad "the probe does not work in the plain program"
[ -s "$d/plain.err" ] && bad "the plain program printed messages unasked"
[ -s "$d/log.err" ] || bad "PROBEKIT_LOG=debug printed nothing in a plain program"
grep -q 'register=-22' "$d/bad.out" || bad "PROBEKIT_PROBE_SIGNAL=1 was not read by a plain program"
grep -q 'signal=50' "$d/sig.out" || bad "PROBEKIT_PROBE_SIGNAL=50 was not read by a plain program"

chown root:root "$d/prog" && chmod 4755 "$d/prog" || exit 1
run "$d/suid.out" "$d/suid.err" PROBEKIT_LOG=debug PROBEKIT_PROBE_SIGNAL=1
run "$d/suid2.out" "$d/suid2.err" PROBEKIT_LOG=debug PROBEKIT_PROBE_SIGNAL=50
echo "set-user-ID root, run by nobody:"
cat "$d/suid.out" "$d/suid2.out" "$d/suid.err" "$d/suid2.err"
grep -q '^secure=1' "$d/suid.out" ||
	skip "no secure execution here (is $d on a nosuid file system?)"
expect=$(sed 's/^secure=0/secure=1/' "$d/plain.out")
[ "$(cat "$d/suid.out")" = "$expect" ] || bad "secure-execution run differs from the plain run without variables: $(cat "$d/suid.out")"
[ "$(cat "$d/suid2.out")" = "$expect" ] || bad "PROBEKIT_PROBE_SIGNAL changed a secure-execution process: $(cat "$d/suid2.out")"
[ -s "$d/suid.err" ] || [ -s "$d/suid2.err" ] && bad "a secure-execution process printed probekit's messages"
[ $fail = 0 ] && echo "secure: ok"
exit $fail
