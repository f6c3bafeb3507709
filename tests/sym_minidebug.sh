#!/bin/sh
# SPDX-License-Identifier: MIT
# sym_minidebug.sh - MiniDebugInfo (issue 10): a stripped program whose
# .gnu_debugdata holds an xz-compressed ELF with a .symtab of its static
# functions, built as gdb's manual ("MiniDebugInfo") does with nm, objcopy
# and xz. Its static function is listed (extent "minidebug") and counted
# by name; a truncated or corrupt section, or one of another build (its
# build id not the file's), is refused with an error line naming the file
# and why, and the other sources still work (.dynsym, .eh_frame, a debug
# file by build-id).
# usage: sym_minidebug.sh PROBEKIT CC SOURCE [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
cc=$2
src=$3
set -- "$1" "$2" "${4:-0}"
. "$(dirname "$0")/cli_common.sh"

for t in nm objcopy strip xz comm; do
	command -v $t >/dev/null || { echo "SKIP: no $t (binutils, xz-utils)"; exit 77; }
done
export PROBEKIT_DEBUG_DIR=""	# no debug file unless a check gives one
cd "$tmp" || exit 1

# gdb's recipe: OUT from the source with -D$2, stripped, with
# .gnu_debugdata; OUT.full kept (for nm), OUT.xz the section's content.
minidebug() {
	"$cc" -O2 -g -rdynamic -Wl,--build-id "$2" -o "$1" "$src" || return 1
	cp "$1" "$1.full"
	nm -D "$1" --format=posix --defined-only | awk '{ print $1 }' | sort >"$1.dynsyms"
	nm "$1" --format=posix --defined-only |
		awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort >"$1.funcsyms"
	comm -13 "$1.dynsyms" "$1.funcsyms" >"$1.keep"
	objcopy --only-keep-debug "$1" "$1.debug"
	objcopy -S --remove-section .gdb_index --remove-section .comment \
		--keep-symbols="$1.keep" "$1.debug" "$1.mini"
	strip --strip-all -R .comment "$1"
	xz -c "$1.mini" >"$1.xz"
	cp "$1" "$1.bare"	# stripped, no .gnu_debugdata: for the bad ones
	objcopy --add-section .gnu_debugdata="$1.xz" "$1"
}
minidebug md -DMD_ADD=3 || { echo "FAIL: cannot build the target"; exit 1; }
minidebug other -DMD_ADD=5 || { echo "FAIL: cannot build the other target"; exit 1; }
off=$(nm md.full | awk '$3 == "md_static_fn" { print "0x" $1 }' | sed 's/^0x0*/0x/')
[ -n "$off" ] || { echo "FAIL: no md_static_fn in md.full"; exit 1; }
grep -qx md_static_fn md.keep || { echo "FAIL: md_static_fn not kept in the MiniDebugInfo"; exit 1; }

listing() { # file: probekit list FILE into $tmp/rep, stderr $tmp/err
	"$pk" list "./$1" >"$tmp/rep" 2>"$tmp/err"
	rc=$?
	# A sanitizer build's agent cannot answer for kinds (man: LIST).
	if [ "$sanitized" = 1 ]; then
		grep -v " did not answer " "$tmp/err" >"$tmp/err2"
		mv "$tmp/err2" "$tmp/err"
	fi
}
count_of() { # function name -> its count in $tmp/rep
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

# ---- 1. read: listed from it, counted by name ----
listing md
check "list: md_static_fn from MiniDebugInfo at $off (rc $rc)" \
	'[ $rc -eq 0 ] && grep -Eq "^md +md_static_fn +$off +[0-9]+ minidebug " "$tmp/rep"'
check "list: md_exported still from .dynsym, nothing said on stderr" \
	'grep -Eq "^md +md_exported +0x[0-9a-f]+ +[0-9]+ \.dynsym " "$tmp/rep" && [ ! -s "$tmp/err" ]'
run count -p 'md:md_static_fn' -p md_exported -o "$tmp/rep" -- ./md 7
check "count -p md:md_static_fn: 7 calls, md_exported 7 (got $(count_of md:md_static_fn) $(count_of md_exported), rc $rc)" \
	'[ $rc -eq 0 ] && [ "$(count_of md:md_static_fn)" = 7 ] && [ "$(count_of md_exported)" = 7 ] && grep -qx "md: 175" "$tmp/out"'

# ---- 2. bad sections: refused, said, the other sources still read ----
head -c $(($(wc -c <md.xz) / 2)) md.xz >trunc.xz
objcopy --add-section .gnu_debugdata=trunc.xz md.bare trunc
# A run of bytes in the middle of the compressed data overwritten.
cp md.xz corrupt.xz
printf '\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377' |
	dd of=corrupt.xz bs=1 seek=$(($(wc -c <md.xz) / 3)) conv=notrunc 2>/dev/null
objcopy --add-section .gnu_debugdata=corrupt.xz md.bare corrupt
printf 'not xz at all' >garbage.xz
objcopy --add-section .gnu_debugdata=garbage.xz md.bare garbage
objcopy --add-section .gnu_debugdata=other.xz md.bare wrongid

for f in trunc:"xz data truncated" corrupt:"" garbage:"not xz data" \
	 wrongid:"its build id is not the file's"; do
	file=${f%%:*}
	why=${f#*:}
	listing "$file"
	check "$file: list says why: \"$(head -c 160 "$tmp/err")\"" \
		'grep -q "^probekit: list: sym: ./$file: .gnu_debugdata (MiniDebugInfo) not read: $why" "$tmp/err"'
	check "$file: said once, list still succeeds (rc $rc)" \
		'[ $rc -eq 0 ] && [ "$(grep -c gnu_debugdata "$tmp/err")" = 1 ]'
	check "$file: md_static_fn not named; md_exported from .dynsym; $off from .eh_frame" \
		'! grep -q md_static_fn "$tmp/rep" && grep -Eq "^$file +md_exported .* \.dynsym " "$tmp/rep" && grep -Eq "^$file +$file\+$off +$off +[0-9]+ \.eh_frame " "$tmp/rep"'
done
# Bombs (review): 300 MB of zeros in a 45 KiB stream (unpacked past 32
# times the section: refused before 300 MB are held), and the same stream
# followed by 65 MiB of xz stream padding (a section over 64 MiB: its first
# buffer was larger than the cap, and the decoder wrote past its end: the
# program died of SIGSEGV). Both refused, said, the program run on.
head -c 300000000 /dev/zero | xz -0 -c >bomb.xz
objcopy --add-section .gnu_debugdata=bomb.xz md.bare bomb
cp bomb.xz bigbomb.xz
head -c 68157440 /dev/zero >>bigbomb.xz
objcopy --add-section .gnu_debugdata=bigbomb.xz md.bare bigbomb
for file in bomb bigbomb; do
	run count -p "$file:md_static_fn" -p md_exported -o "$tmp/rep" -- "./$file" 3
	check "$file ($(wc -c <$file.xz) bytes): refused (larger unpacked than ...), md_exported 3, the program's status 0 (rc $rc)" \
		'[ $rc -eq 0 ] && grep -q "MiniDebugInfo) not read: larger unpacked than" "$tmp/rep" && [ "$(count_of md_exported)" = 3 ]'
done
rm -f bomb.xz bigbomb.xz bomb bigbomb
run count -p 'trunc:md_static_fn' -p "trunc:$off" -p md_exported -o "$tmp/rep" -- ./trunc 5
check "count over a truncated one: md_static_fn not probed, saying why; $off and md_exported 5 (rc $rc)" \
	'[ $rc -eq 0 ] && grep -Eq "^ +-  trunc:md_static_fn  \(not probed in 1 of 1: .*gnu_debugdata \(MiniDebugInfo\) not read: xz data truncated\)" "$tmp/rep" && [ "$(count_of "trunc:$off")" = 5 ] && [ "$(count_of md_exported)" = 5 ]'

# ---- 3. refused, the debug file found by build-id instead ----
id=$(readelf -n md.full | awk '/Build ID/ { print $3 }')
mkdir -p "dbg/.build-id/$(echo "$id" | cut -c1-2)"
cp md.debug "dbg/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
PROBEKIT_DEBUG_DIR="$tmp/dbg" "$pk" list ./wrongid >"$tmp/rep" 2>"$tmp/err"
check "wrongid with a debug file installed: md_static_fn from it (extent debug)" \
	'grep -Eq "^wrongid +(minidebug_target.c#)?md_static_fn +$off +[0-9]+ debug " "$tmp/rep" && grep -q "build id is not the file" "$tmp/err"'

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
