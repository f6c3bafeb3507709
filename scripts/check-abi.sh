#!/bin/sh
# SPDX-License-Identifier: MIT
# check-abi.sh - exported symbols == src/probekit.map == PK_API declarations, each documented with Context:.
#
# Usage: scripts/check-abi.sh [path/to/libprobekit.so]   (default build/libprobekit.so)
#
# Three lists of public names must be equal:
#   1. the pk_* symbols the shared library defines in its dynamic table (nm -D);
#   2. the names in the version map's global: sections;
#   3. the PK_API declarations of include/probekit.h and of its parts,
#      include/probekit/*.h (functions and extern variables).
# The library may export nothing else but its version nodes and the libc
# names src/sig/interpose.c defines with PK_EXPORT (signal interposition).
# Every PK_API function's kernel-doc comment, directly above it (or above the
# group of PK_API declarations it shares one comment with), has a Context:
# line. Extern variables (pk_debug_key) are documented in prose and exempt.
# Prints every difference; exits 1 on any, 2 on a usage problem.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$root/build/libprobekit.so}
map=$root/src/probekit.map
# probekit.h and every part it is made of (probekit/*.h).
set -- "$root/include/probekit.h" "$root"/include/probekit/*.h
[ -f "$2" ] || { echo "check-abi: no headers under $root/include/probekit" >&2; exit 2; }

if [ ! -f "$lib" ]; then
	echo "check-abi: $lib not found (build first)" >&2
	exit 2
fi
command -v nm >/dev/null || { echo "check-abi: nm not found" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. Exported, defined symbols; strip @@VERSION.
nm -D --defined-only "$lib" | awk '{ s = $NF; sub(/@.*/, "", s); print s }' |
	sort -u > "$tmp/all"
grep '^pk_' "$tmp/all" > "$tmp/nm" || true
# The libc names src/sig/interpose.c exports on purpose (PK_EXPORT), unversioned.
sed -n 's/^PK_EXPORT [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' \
	"$root/src/sig/interpose.c" | sort -u > "$tmp/interposed"
grep -v -e '^pk_' -e '^PROBEKIT_' "$tmp/all" | comm -23 - "$tmp/interposed" \
	> "$tmp/leaked" || true

# 2. Version map: every "name;" line inside a global: section.
awk '
	/global:/ { g = 1; next }
	/local:/  { g = 0; next }
	/^}/      { g = 0; next }
	g { gsub(/[ \t;]/, ""); if ($0 != "") print }
' "$map" | sort -u > "$tmp/map"

# 3. Header: PK_API declarations and their comments.
#    A declaration runs from a line starting with PK_API to the first ";".
#    It is covered when a /** ... */ comment holding "Context:" ends on the
#    line above it, or above the unbroken run of PK_API declarations it
#    belongs to. Writes names to decl, problems to doc.
awk -v declf="$tmp/decl" -v docf="$tmp/doc" '
	# Each file starts outside any comment, declaration or group.
	FNR == 1 { incomment = 0; indecl = 0; adjacent = 0; covered = 0 }
	function flush_decl(    t, name, isvar) {
		t = decl
		gsub(/\/\*.*\*\//, "", t)
		isvar = (t ~ /^PK_API[ \t]+extern[ \t]/ && t !~ /\(/)
		if (isvar) {
			sub(/[ \t]*(__attribute__.*)?;.*$/, "", t)
			match(t, /[A-Za-z_][A-Za-z0-9_]*$/)
		} else {
			sub(/[ \t]*\(.*$/, "", t)
			match(t, /[A-Za-z_][A-Za-z0-9_]*$/)
		}
		name = substr(t, RSTART, RLENGTH)
		print name > declf
		if (!isvar && !covered)
			printf("%s:%d: %s: no kernel-doc comment with a Context: line above it\n",
			       FILENAME, declline, name) > docf
		decl = ""
	}
	# Comments (kernel-doc or not).
	incomment {
		if ($0 ~ /Context:/) ctx = 1
		if ($0 ~ /\*\//) { incomment = 0; adjacent = 1; covered = kdoc && ctx }
		next
	}
	indecl {
		decl = decl " " $0
		if ($0 ~ /;/) { indecl = 0; flush_decl() }
		next
	}
	/^[ \t]*\/\*/ {
		kdoc = ($0 ~ /^[ \t]*\/\*\*/); ctx = ($0 ~ /Context:/)
		if ($0 ~ /\*\//) { adjacent = 1; covered = kdoc && ctx }
		else incomment = 1
		next
	}
	/^PK_API[ \t]/ {
		if (!adjacent) covered = 0
		declline = FNR; decl = $0
		if ($0 ~ /;/) flush_decl(); else indecl = 1
		adjacent = 1        # the next PK_API line shares the comment
		next
	}
	# Anything else, blank lines included, ends a comment group.
	{ adjacent = 0; covered = 0 }
' "$@"
touch "$tmp/decl" "$tmp/doc"
sort -u "$tmp/decl" > "$tmp/hdr"

status=0
diff_lists() { # $1 $2: files, $3 $4: their names
	only1=$(comm -23 "$1" "$2")
	only2=$(comm -13 "$1" "$2")
	if [ -n "$only1" ]; then
		echo "check-abi: in $3 but not in $4:"
		echo "$only1" | sed 's/^/    /'
		status=1
	fi
	if [ -n "$only2" ]; then
		echo "check-abi: in $4 but not in $3:"
		echo "$only2" | sed 's/^/    /'
		status=1
	fi
}
diff_lists "$tmp/nm" "$tmp/map" "the library (nm -D)" "src/probekit.map"
diff_lists "$tmp/map" "$tmp/hdr" "src/probekit.map" "include/probekit{.h,/*.h} (PK_API)"
if [ -s "$tmp/leaked" ]; then
	echo "check-abi: the library exports symbols without the pk_ prefix:"
	sed 's/^/    /' "$tmp/leaked"
	status=1
fi
if [ -s "$tmp/doc" ]; then
	echo "check-abi: PK_API declarations without a Context: line:"
	sed "s|^$root/||; s/^/    /" "$tmp/doc"
	status=1
fi

n=$(wc -l < "$tmp/hdr")
if [ $status -eq 0 ]; then
	echo "check-abi: OK: $n public symbols agree in the library, the map and the $# headers"
else
	echo "check-abi: FAILED ($n PK_API declarations in the $# headers)"
fi
exit $status
