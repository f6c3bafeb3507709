#!/bin/sh
# SPDX-License-Identifier: MIT
# deps-debian.sh - install probekit's build dependencies on Debian 12; idempotent.
#
# Does nothing (and needs no root) when every package is already installed.
# Otherwise, as root: apt-get update only when the package lists are missing
# or an install attempt fails on stale lists, then apt-get install.
set -eu

PKGS="cmake pkg-config gcc g++ make liburcu-dev libzydis-dev libelf-dev libsigsegv-dev zlib1g-dev man-db xz-utils liblzma-dev python3 python3-prometheus-client protobuf-compiler clang libxml2-utils"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	"install ok installed") ;;
	*) missing="$missing $p" ;;
	esac
done

if [ -z "$missing" ]; then
	echo "deps-debian.sh: all dependencies present"
	exit 0
fi

echo "deps-debian.sh: missing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps-debian.sh: run as root (or: sudo apt-get install$missing)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
install() {
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	apt-get install -y --no-install-recommends $PKGS
}
have_lists() {
	ls /var/lib/apt/lists/ 2>/dev/null | grep -q '_Packages'
}

if ! have_lists; then
	apt-get update
	install
elif ! install; then
	echo "deps-debian.sh: install failed; refreshing package lists and retrying"
	apt-get update
	install
fi
