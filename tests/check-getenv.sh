#!/bin/sh
# check-getenv.sh - the library and the agent read PROBEKIT_* through
# pk_getenv() (secure_getenv: ignored in a set-user-ID process, issue 9
# item 7), never getenv(): fails naming every call that does.
# Usage: check-getenv.sh SOURCE_DIR
src=${1:?usage: check-getenv.sh SOURCE_DIR}
bad=$(grep -rnE '(^|[^_a-z])getenv[[:space:]]*\(' "$src/src" "$src/agent" "$src/prof" \
	--include='*.c' --include='*.h' | grep -v 'secure_getenv' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*)')
if [ -n "$bad" ]; then
	echo "getenv() where pk_getenv() is needed:"
	echo "$bad"
	exit 1
fi
echo "no getenv() in src/, agent/, prof/"
