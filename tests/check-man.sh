#!/bin/sh
# SPDX-License-Identifier: MIT
# check-man.sh - every man page in the tree, aliases included, renders with man -l from any directory, and names its file.
#
# Usage: tests/check-man.sh MAN_DIR
#
# Every file MAN_DIR/man<N>/*.<N> (pages and alias symlinks) must:
#   - render with `man -l FILE`, run from a directory that is not MAN_DIR
#     (a `.so man3/x.3` alias resolves against the current directory only,
#     so aliases are symlinks), to at least 10 lines, with no message that a
#     file could not be opened or a request failed;
#   - list its own name (the file name without the section) in the NAME
#     line (the one whatis(1) shows) of the page it leads to, so an alias
#     leads to the page that documents it.
# Exits 0, 1 on any failure, 77 when man(1) is not installed.
set -u

dir=$1
command -v man >/dev/null 2>&1 || { echo "SKIP: man(1) not installed (man-db)"; exit 77; }
[ -d "$dir" ] || { echo "check-man: $dir: no such directory"; exit 1; }
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

fail=0 n=0
for f in "$dir"/* "$dir"/*/*; do
	[ -f "$f" ] || [ -L "$f" ] || continue
	rel=${f#"$dir"/}
	case "$rel" in
	man[1-9]/*.[1-9]) ;;
	*) echo "FAIL $rel: not a man<N>/NAME.<N> page (the tree is laid out as installed)"
	   fail=$((fail + 1)); continue ;;
	esac
	sec=${rel%%/*}; sec=${sec#man}
	case "$rel" in *."$sec") ;; *)
		echo "FAIL $rel: section suffix differs from its directory"; fail=$((fail + 1)); continue ;;
	esac
	n=$((n + 1))
	name=$(basename "$rel" ".$sec")
	MANWIDTH=80 man -l "$f" >"$tmp/out" 2>"$tmp/err"
	lines=$(wc -l < "$tmp/out")
	if grep -Eiq "can't open|cannot open|failed|no such file" "$tmp/err"; then
		echo "FAIL $rel: $(head -n 1 "$tmp/err")"
		fail=$((fail + 1))
	elif [ "$lines" -lt 10 ]; then
		echo "FAIL $rel: renders $lines lines"
		fail=$((fail + 1))
	elif ! sed -n '/^\.SH NAME/{n;s/ *\\-.*//;s/,/ /g;p;q;}' "$f" | tr ' ' '\n' |
	     grep -qx "$name"; then
		echo "FAIL $rel: the NAME line of the page it renders does not list $name"
		fail=$((fail + 1))
	fi
done
[ $n -gt 0 ] || { echo "check-man: no pages under $dir"; exit 1; }
echo "check-man: $n pages, $fail failed"
[ $fail -eq 0 ]
