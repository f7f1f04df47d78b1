#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ibv_import_device/_pd/_mr across processes attached to one rocemu host
# (issue 15.5): host_import.sh HOST_IMPORT_EXE. The three processes and what
# they check are in host_import.c; this starts the host, runs them, and
# checks that the host let every process and QPN go afterwards.
set -u
exe=${1:?host_import executable}
TIMEOUT=${HOST_TIMEOUT:-300}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog "$exe"
host_dir hostimport
host_start h "" --port memif:server:$dir/up.sock --ip 10.71.$pair_net.1/24 || exit 1
host_start h2 "" --port memif:server:$dir/up2.sock --ip 10.72.$pair_net.1/24 || exit 1
fail=0
host_run h "" $dir/run.log "$exe" --other-host $dir/h2
wait $! || fail=1
cat $dir/run.log
[ $fail = 0 ] || echo "FAIL: host_import"
# the closed context's fd: refused for what it is, not as an exited process
grep -q "closed that device context; the fd outlived it" $dir/run.log ||
	{ echo "FAIL: the fd of a closed context was not named as such"; fail=1; }
stat=$(host_stat_idle h)
echo "$stat" | grep -q " 0 processes attached (3 since start, 0 refused, 3 gone); QPNs: 0 live" ||
	{ echo "FAIL: processes or QPNs still held"; echo "$stat" | head -4; fail=1; }
stat=$(host_stat_idle h2)
echo "$stat" | grep -q " 0 processes attached (1 since start, 0 refused, 1 gone)" ||
	{ echo "FAIL: no process of another host"; echo "$stat" | head -4; fail=1; }
host_stop h >/dev/null
host_stop h2 >/dev/null
exit $fail
