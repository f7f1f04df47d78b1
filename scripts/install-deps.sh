#!/bin/sh
# Install the Debian packages given as arguments when some are missing.
# As root: apt-get installs them. Otherwise: print the exact command and fail.
set -e
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "rocemu needs these Debian packages:$missing" >&2
	echo "install them with:  sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends $missing
