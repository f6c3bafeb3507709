# SPDX-License-Identifier: MIT
# cli_common.sh - sourced by the command's test scripts (cli*.sh): their
# arguments, a private TMPDIR, check() and run().
# Arguments: PROBEKIT CLI_TARGET [SANITIZED], SANITIZED being 0, or the
# ASan runtime (gcc -print-file-name=libasan.so) of a sanitizer build.
# Sets pk, target, tmp (removed at exit) and fails.
set -u
pk=$1
target=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# probekit makes its counts directory under $TMPDIR: a private one, so the
# leftover checks see only this script's runs (others may run concurrently).
export TMPDIR="$tmp/td"
mkdir "$TMPDIR"

# A sanitizer build's agent needs the ASan runtime first in every process
# of COMMAND, which an uninstrumented COMMAND (sh, ls) does not load: run
# probekit, and so COMMAND, with it preloaded (the agent goes before it;
# verify_asan_link_order=0 lets that be). Leaks are not looked for there:
# sh and python3 have their own; $pk_leaks looks for them, for runs whose
# every process is probekit or the instrumented cli_target.
sanitized=0
case "${3:-0}" in
0) ;;
/*)
	[ -r "$3" ] || { echo "SKIP: no ASan runtime at $3"; exit 77; }
	sanitized=1
	cat >"$tmp/pk" <<WRAP
#!/bin/sh
LD_PRELOAD="$3\${LD_PRELOAD:+:\$LD_PRELOAD}" \\
ASAN_OPTIONS="\${ASAN_OPTIONS:-}:verify_asan_link_order=0:detect_leaks=0" \\
	exec "$pk" "\$@"
WRAP
	sed 's/detect_leaks=0/detect_leaks=1/' "$tmp/pk" >"$tmp/pk_leaks"
	chmod +x "$tmp/pk" "$tmp/pk_leaks"
	pk="$tmp/pk"
	pk_leaks="$tmp/pk_leaks"
	;;
*)
	echo "SKIP: sanitizer build without a known ASan runtime ($3)"
	exit 77
	;;
esac

check() { # description, then a shell condition
	desc=$1
	shift
	if eval "$@"; then
		echo "ok   $desc"
	else
		echo "FAIL $desc   [$*]"
		fails=$((fails + 1))
	fi
}

run() { # run probekit with the report in $tmp/rep; status in $rc
	"$pk" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}

finish() { # the script's exit
	[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
	echo "all checks passed"
	exit 0
}
