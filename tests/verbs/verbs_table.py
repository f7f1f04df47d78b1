#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/verbs-provider.md lists every verb rocemu's libibverbs.so.1 exports
(every function at an IBVERBS_1.x version, default or compat), each with its
status, and the status is true:

    | `ibv_attach_mcast` | yes | ... |
    | `ibv_import_pd`    | stub | ... |

`stub` exactly for the names whose every exported version is one of
gen_abi.py's EOPNOTSUPP stubs (abi_stubs.c: at the default version, or a
compat-only name such as ibv_register_driver), `yes` for the others. The table lies between
the lines `<!-- exported-verbs -->` and `<!-- /exported-verbs -->`.

usage: verbs_table.py LIBIBVERBS ABI_STUBS_C DOC
"""
import re
import subprocess
import sys


def exported(lib):
    """name -> set of IBVERBS_1.x versions it is exported at"""
    out = subprocess.run(['objdump', '-T', lib], capture_output=True, text=True,
                         check=True).stdout
    names = {}
    for line in out.splitlines():
        m = re.search(r'\s\(?(IBVERBS_1\.\d+)\)?\s+(\S+)$', line)
        if m and ' DF ' in line:
            names.setdefault(m.group(2), set()).add(m.group(1))
    return names


def stub_versions(path):
    """(name, version) pairs that are stubs"""
    text = open(path).read()
    pairs = set(re.findall(r'\.symver (\w+), \1@@@(IBVERBS_1\.\d+)', text))
    pairs |= set(re.findall(r'\.symver rocemu_compat_\w+, (\w+)@(IBVERBS_1\.\d+)"', text))
    return pairs


def table(path):
    text = open(path).read()
    m = re.search(r'<!-- exported-verbs -->(.*?)<!-- /exported-verbs -->', text, re.S)
    if not m:
        return None
    rows = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) >= 2 and cells[0].startswith('`'):
            rows[cells[0].strip('`')] = cells[1]
    return rows


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    versions, rows = exported(sys.argv[1]), table(sys.argv[3])
    pairs = stub_versions(sys.argv[2])
    names = set(versions)
    stubbed = {n for n, vs in versions.items() if all((n, v) in pairs for v in vs)}
    if rows is None:
        print('FAIL: no exported-verbs table in %s' % sys.argv[3])
        return 1
    bad = []
    for n in sorted(names - set(rows)):
        bad.append('%s is exported but not in the table' % n)
    for n in sorted(set(rows) - names):
        bad.append('%s is in the table but not exported' % n)
    for n in sorted(names & set(rows)):
        want = 'stub' if n in stubbed else 'yes'
        if rows[n] != want:
            bad.append('%s: the table says "%s", the library has "%s"' % (n, rows[n], want))
    for b in bad:
        print('FAIL: ' + b)
    print('%d exported verbs, %d stubs, %d problems' % (len(names), len(stubbed & names),
                                                       len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
