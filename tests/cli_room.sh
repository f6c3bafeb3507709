#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_room.sh - the probekit command with TMPDIR on a small, full file
# system (a 64 KiB tmpfs mounted here): refused with 125 before COMMAND
# runs when not even one record fits; a process whose record finds no room
# runs untouched (no SIGBUS) and probekit says it was not counted.
# usage: cli_room.sh PROBEKIT CLI_TARGET [SANITIZED] (see cli_common.sh)
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
small="$tmp/small"
mkdir "$small"
if ! mount -t tmpfs -o size=64k,mode=0700 tmpfs "$small" 2>"$tmp/mount.err"; then
	echo "SKIP: cannot mount a tmpfs: $(cat "$tmp/mount.err")"
	exit 77
fi
trap 'umount "$small"; rm -rf "$tmp"' EXIT
export TMPDIR="$small"

# Room for one record of the image (with 64 specs a record is about 40
# KiB, the file system 64 KiB): the first image counts, the ten it execs
# find no room,
# run untouched (each says "cli_target done") and are reported uncounted.
# (Sparse records used to fill the file system and kill them by SIGBUS.)
many=$(for i in $(seq 63); do printf -- '-p f%d ' "$i"; done)
# shellcheck disable=SC2086 # one word per -p and name, wanted
run count -p cli_target_fn $many -o "$tmp/rep" -- "$target" 3 exec 1 exec 1 exec 1 exec 1 \
	exec 1 exec 1 exec 1 exec 1 exec 1 exec 1
check "no room for ten of eleven records: all eleven processes ran to the end" \
	'[ "$(grep -c "^cli_target done$" "$tmp/out")" -eq 11 ]'
check "... 125, says so and where" \
	'[ $rc -eq 125 ] && grep -q "no room for the counts in $small: 10 processes of the command not counted" "$tmp/err"'
check "... the first counted" 'grep -Eq "^ +3  cli_target_fn$" "$tmp/rep"'
check "... nothing left behind" '[ -z "$(ls -A "$small")" ]'

# Full: not one record fits. Refused before COMMAND does anything.
dd if=/dev/zero of="$small/fill" bs=4096 2>/dev/null
run count -p cli_target_fn -o "$tmp/rep" -- sh -c ": >\"$tmp/ran\"; \"$target\" 1"
check "full TMPDIR: 125, no room for the counts in TMPDIR" \
	'[ $rc -eq 125 ] && grep -q "no room for the counts in $small" "$tmp/err"'
check "full TMPDIR: COMMAND never started" '[ ! -e "$tmp/ran" ]'
check "full TMPDIR: nothing left behind" '[ "$(ls -A "$small")" = fill ]'

finish
