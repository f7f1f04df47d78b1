#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""rocemu's libibverbs.so.1 must export exactly what the installed rdma-core
libibverbs exports: the same name@version set, each default (@@) or hidden
compat (@) as there, functions as functions and data as data, the same
version nodes, and the soname libibverbs.so.1.

usage: abi_compare.py [--soname librdmacm.so.1 --prefix RDMACM] OURS [SYSTEM]
(SYSTEM found with ldconfig if omitted; defaults: libibverbs.so.1, IBVERBS)
"""
import re
import subprocess
import sys


SONAME = 'libibverbs.so.1'
PREFIX = 'IBVERBS'


def exports(lib):
    out = subprocess.run(['objdump', '-T', lib], capture_output=True, text=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        m = re.match(r'^[0-9a-f]+ (.{7}) (\S+)\s+[0-9a-f]+\s+(\(?)(' + PREFIX + r'_[A-Z0-9_.]+)\)?\s+(\S+)$', line)
        if not m or m.group(2) == '*UND*':
            continue
        flags, section, paren, ver, name = m.groups()
        kind = 'version-node' if section == '*ABS*' else ('data' if 'O' in flags else 'function')
        syms.add((name, ver, 'hidden' if paren else 'default', kind))
    return syms


def soname(lib):
    out = subprocess.run(['objdump', '-p', lib], capture_output=True, text=True, check=True).stdout
    m = re.search(r'SONAME\s+(\S+)', out)
    return m.group(1) if m else None


def system_lib():
    out = subprocess.run(['/sbin/ldconfig', '-p'], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r'\s*' + re.escape(SONAME) + r' \(([^)]*)\) => (\S+)', line)
        if m:
            return m.group(2)
    return None


def main():
    global SONAME, PREFIX
    args = sys.argv[1:]
    while args and args[0].startswith('--'):
        if len(args) < 2:
            sys.exit(__doc__)
        if args[0] == '--soname':
            SONAME = args[1]
        elif args[0] == '--prefix':
            PREFIX = args[1]
        else:
            sys.exit(__doc__)
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    ours = args[0]
    system = args[1] if len(args) > 1 else system_lib()
    if not system:
        print('SKIP: no installed %s to compare with' % SONAME)
        sys.exit(77)
    a, b = exports(ours), exports(system)
    ok = True
    if soname(ours) != SONAME:
        print('soname of %s is %s, expected %s' % (ours, soname(ours), SONAME))
        ok = False
    for what, diff in (('missing from ours', b - a), ('extra in ours', a - b)):
        for name, ver, vis, kind in sorted(diff):
            print('%s: %s %s@%s (%s)' % (what, kind, name, ver, vis))
            ok = False
    n_def = sum(1 for s in b if s[2] == 'default' and s[3] != 'version-node')
    n_hid = sum(1 for s in b if s[2] == 'hidden')
    privs = sorted({s[1] for s in b if s[1].startswith(PREFIX + '_PRIVATE_')})
    print('%s: %d exports compared with %s (%d default, %d hidden compat, nodes %s)'
          % ('IDENTICAL' if ok else 'DIFFERENT', len(b), system, n_def, n_hid, ', '.join(privs)))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
