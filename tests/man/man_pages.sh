#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The manual pages, as `meson install` installs them:
#  - each renders with `man -l` without a single groff or man warning;
#  - rocemu(1) names every command of `rocemu --help`, and each command's
#    page every option its --help prints (they cannot drift apart);
#    rocemu.conf(5) every port option as a key;
#  - meson installs all five under <mandir>/man1 and man5.
# usage: man_pages.sh PAGES_DIR ROCEMU BUILD_DIR
set -u
pages=${1:?usage: $0 PAGES_DIR ROCEMU BUILD_DIR}
rocemu=${2:?}
build=${3:?}
command -v man >/dev/null || { echo "SKIP: man not installed (apt-get install man-db)"; exit 77; }
fail=0
tmp=$(mktemp -d /tmp/rocemu-man-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

render() { # PAGE -> $tmp/PAGE.txt, warnings in $tmp/PAGE.err
	LC_ALL=C.UTF-8 MANWIDTH=80 MAN_DISABLE_SECCOMP=1 man --warnings=w -E UTF-8 -l "$pages/$1" \
		>"$tmp/$1.txt" 2>"$tmp/$1.err"
}

for page in rocemu.1 rocemu-run.1 rocemu-port.1 rocemu-inspect.1 rocemu.conf.5; do
	if [ ! -f "$pages/$page" ]; then
		echo "FAIL: $page: not built in $pages"; fail=1; continue
	fi
	render $page
	rc=$?
	if [ $rc != 0 ] || [ -s "$tmp/$page.err" ] || [ "$(wc -l <"$tmp/$page.txt")" -lt 20 ]; then
		echo "FAIL: $page: man -l status $rc, $(wc -l <"$tmp/$page.txt") lines; warnings:"
		cat "$tmp/$page.err"
		fail=1
	else
		echo "ok: $page renders without warnings ($(wc -l <"$tmp/$page.txt") lines)"
	fi
	grep -q "@VERSION@" "$pages/$page" && { echo "FAIL: $page: @VERSION@ not replaced"; fail=1; }
done

# words WORDS... must all appear in PAGE's rendered text (hyphenation off:
# man breaks long words at line ends, so compare with the lines joined)
mentions() { # PAGE WHAT WORD...
	local page=$1 what=$2 missing=()
	shift 2
	local text
	text=$(tr -d '\n' <"$tmp/$page.txt" | sed 's/‐ *//g; s/- \{2,\}/-/g')
	for w in "$@"; do
		grep -qF -- "$w" <<<"$text" || missing+=("$w")
	done
	if [ ${#missing[@]} = 0 ]; then
		echo "ok: $page names every $what ($#)"
	else
		echo "FAIL: $page does not name: ${missing[*]}"; fail=1
	fi
}
opts() { # COMMAND: the --options its --help prints
	"$rocemu" "$1" --help | grep -oE -- '--[a-z][a-z-]*[a-z]' | sort -u
}
mentions rocemu.1 command $("$rocemu" --help | awk '/^commands:/{on=1; next} on && !NF {exit} on {print $1}')
for cmd in run port inspect; do
	[ -f "$tmp/rocemu-$cmd.1.txt" ] && mentions rocemu-$cmd.1 "option of 'rocemu $cmd --help'" $(opts $cmd)
done
[ -f "$tmp/rocemu.conf.5.txt" ] && mentions rocemu.conf.5 "port option as a key" \
	$(opts port | grep -vE -- '--(ping|count|interval|stay|duration|help|name)$' | sed 's/^--//')

# installed by `meson install`
inst=$(meson introspect "$build" --installed 2>/dev/null)
for page in man1/rocemu.1 man1/rocemu-run.1 man1/rocemu-port.1 man1/rocemu-inspect.1 man5/rocemu.conf.5; do
	grep -q "share/man/$page\"" <<<"$inst" || { echo "FAIL: meson install does not install $page"; fail=1; }
done
[ $fail = 0 ] && echo "ok: meson install installs the five pages"
exit $fail
