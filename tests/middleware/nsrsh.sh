#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mpirun's rsh agent for mpi_pair.sh: the "hosts" are network namespaces.
#   nsrsh.sh HOST COMMAND...  runs COMMAND (one shell line, as ssh does) in the
# namespace that $NSRSH_HOSTS ("ADDR=NAMESPACE ...") gives HOST.
host=$1
shift
for pair in $NSRSH_HOSTS; do
	if [ "${pair%%=*}" = "$host" ]; then
		exec ip netns exec "${pair#*=}" sh -c "$*"
	fi
done
echo "nsrsh.sh: no namespace for host $host" >&2
exit 255
