#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generate the ABI of one of rocemu's drop-in libraries from the installed
rdma-core library it replaces: libibverbs.so.1 (default) or, with
--soname librdmacm.so.1 --node-prefix RDMACM --errno-minus1, librdmacm.so.1.

Reads the export table (`objdump -T`) and version definitions (`objdump -p`)
of the system library and writes:
  --map     a GNU ld version script with the same nodes and parents;
  --stubs   C error stubs for every exported name@version that rocemu does
            not implement by hand (errno = EOPNOTSUPP, error return value);
  --symver  a header defining ROCEMU_SYMVER_<name> for every hand-implemented
            name: the .symver that binds it as the default version (@@@).
Hand-implemented names are those marked ROCEMU_PUBLIC(name) in --sources.
Return types come from the prototypes in the --header files (repeatable) plus
a small table for names declared in rdma-core's private headers.
Nothing here knows the IBVERBS_PRIVATE_<N> number: it is whatever the
installed library defines.
"""
import argparse
import os
import re
import subprocess
import sys

# Names declared in rdma-core's uninstalled headers (driver.h, marshall.h...):
# the kind of value they return.
HAND_KINDS = {
    '__ioctl_final_num_attrs': 'zero',
    '__verbs_log': 'void',
    '_verbs_init_and_alloc_context': 'ptr',
    'execute_ioctl': 'int',
    'ibv_copy_ah_attr_from_kern': 'void',
    'ibv_copy_path_rec_from_kern': 'void',
    'ibv_copy_path_rec_to_kern': 'void',
    'ibv_copy_qp_attr_from_kern': 'void',
    'ibv_dofork_range': 'int',
    'ibv_dontfork_range': 'int',
    'ibv_get_sysfs_path': 'ptr',
    'ibv_query_gid_type': 'int',
    'ibv_read_ibdev_sysfs_file': 'minus1',
    'ibv_read_sysfs_file': 'minus1',
    'ibv_register_driver': 'void',
    'verbs_init_cq': 'void',
    'verbs_open_device': 'int',
    'verbs_set_ops': 'void',
    'verbs_uninit_context': 'void',
}
# Functions whose man page says they return -1 (not an errno) on failure.
MINUS_ONE = {'ibv_get_cq_event', 'ibv_get_async_event', 'ibv_read_sysfs_file',
             'ibv_get_pkey_index', 'ibv_read_ibdev_sysfs_file'}


def find_library(path, soname):
    if path and os.path.exists(path):
        return path
    out = subprocess.run(['/sbin/ldconfig', '-p'], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r'\s*' + re.escape(soname) + r' \(([^)]*)\) => (\S+)', line)
        if m and 'x86-64' in m.group(1) or (m and os.uname().machine not in ('x86_64',)):
            return m.group(2)
    sys.exit('gen_abi: cannot find the installed %s' % soname)


def read_exports(lib, objdump, prefix):
    """[(name, version, hidden, kind 'F'|'O', size)] for every <prefix>_* export."""
    out = subprocess.run([objdump, '-T', lib], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        m = re.match(r'^[0-9a-f]+ (.{7}) (\S+)\s+([0-9a-f]+)\s+(\(?)(' + prefix +
                     r'_[A-Z0-9_.]+)\)?\s+(\S+)$', line)
        if not m:
            continue
        flags, section, size, paren, ver, name = m.groups()
        if section == '*ABS*' or section == '*UND*':
            continue
        syms.append((name, ver, paren == '(', 'O' if 'O' in flags else 'F', int(size, 16)))
    return syms


def read_nodes(lib, objdump, prefix):
    """[(node, parent or None)] in definition order."""
    out = subprocess.run([objdump, '-p', lib], capture_output=True, text=True, check=True).stdout
    nodes = []
    in_defs = False
    for line in out.splitlines():
        if line.startswith('Version definitions:'):
            in_defs = True
            continue
        if in_defs:
            if not line.strip() or line.startswith('Version References'):
                break
            m = re.match(r'^\d+ 0x[0-9a-f]+ 0x[0-9a-f]+ (\S+)$', line)
            if m:
                if m.group(1).startswith(prefix):
                    nodes.append([m.group(1), None])
                continue
            m = re.match(r'^\s+(\S+)\s*$', line)
            if m and nodes:
                nodes[-1][1] = m.group(1)
    return nodes


def hand_implemented(sources):
    names = set()
    for src in sources:
        with open(src, encoding='utf-8') as f:
            names.update(re.findall(r'^ROCEMU_PUBLIC\((\w+)\)', f.read(), re.M))
    return names


def return_kinds(headers):
    text = ''
    for header in headers:
        with open(header, encoding='utf-8') as f:
            text += f.read() + '\n'

    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'^\s*#(?:[^\n]*\\\n)*[^\n]*', ' ', text, flags=re.M)
    text = re.sub(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)', ' ', text)
    text = re.sub(r'\b__attribute_\w+', ' ', text)
    kinds = {}
    # A declaration: return type words, optional stars, name, '('.
    for m in re.finditer(r'(?:^|[;}])\s*((?:extern\s+)?(?:const\s+)?(?:struct\s+|enum\s+|unsigned\s+)?\w+)'
                         r'\s*(\**)\s*(\w+)\s*\(', text):
        rtype, stars, name = m.group(1), m.group(2), m.group(3)
        if 'static' in rtype or 'inline' in rtype or name in kinds:
            continue
        base = rtype.split()[-1]
        if stars:
            kinds[name] = 'ptr'
        elif base == 'void':
            kinds[name] = 'void'
        elif base in ('int',) or rtype.startswith('enum') or rtype.startswith('extern enum'):
            kinds[name] = 'int'
        else:
            kinds[name] = 'zero'
    return kinds


RETURNS = {
    'ptr': ('void *', 'NULL'),
    'int': ('int', 'EOPNOTSUPP'),
    'minus1': ('int', '-1'),
    'zero': ('unsigned long', '0'),
    'void': ('void', None),
}


def c_ident(ver):
    return ver.replace('.', '_')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lib', default='')
    ap.add_argument('--objdump', default='objdump')
    ap.add_argument('--header', action='append', required=True)
    ap.add_argument('--soname', default='libibverbs.so.1')
    ap.add_argument('--node-prefix', default='IBVERBS')
    ap.add_argument('--errno-minus1', action='store_true',
                    help='stubs of int/long functions return -1 (errno set), as librdmacm does')
    ap.add_argument('--map', required=True)
    ap.add_argument('--stubs', required=True)
    ap.add_argument('--symver', required=True)
    ap.add_argument('sources', nargs='*')
    a = ap.parse_args()

    lib = find_library(a.lib, a.soname)
    syms = read_exports(lib, a.objdump, a.node_prefix)
    nodes = read_nodes(lib, a.objdump, a.node_prefix)
    hand = hand_implemented(a.sources)
    kinds = return_kinds(a.header)
    kinds.update({k: v for k, v in HAND_KINDS.items() if k not in kinds})

    # Version script: every exported name in the node of each of its versions.
    per_node = {n: set() for n, _ in nodes}
    for name, ver, _hidden, _k, _s in syms:
        per_node.setdefault(ver, set()).add(name)
    lines = ['/* Generated by gen_abi.py from %s: do not edit. */' % lib]
    for i, (node, parent) in enumerate(nodes):
        names = sorted(per_node.get(node, ()))
        lines.append('%s {' % node)
        if names:
            lines.append('  global:')
            lines.extend('    %s;' % n for n in names)
        if i == 0:
            lines.append('  local: *;')
        lines.append('}%s;' % (' ' + parent if parent else ''))
    with open(a.map, 'w') as f:
        f.write('\n'.join(lines) + '\n')

    default_ver = {name: ver for name, ver, hidden, _k, _s in syms if not hidden}

    # Stubs.
    out = ['/* Generated by gen_abi.py from %s: do not edit. */' % lib,
           '/* Every export of the installed %s that rocemu does not implement:' % a.soname,
           ' * it sets errno to EOPNOTSUPP and returns the failure value of its type. */',
           '#include <errno.h>', '#include <stddef.h>', '']
    unknown = []
    for name, ver, hidden, kind, size in sorted(syms, key=lambda s: (s[0], s[1])):
        if not hidden and name in hand:
            continue
        if kind == 'O':
            if hidden:
                continue
            out.append('unsigned char %s[%d] __attribute__((visibility("default")));' % (name, max(size, 1)))
            out.append('__asm__(".symver %s, %s@@@%s");' % (name, name, ver))
            continue
        k = 'minus1' if name in MINUS_ONE else kinds.get(name)
        if k is None and name.startswith('ibv_cmd_'):
            k = 'int'  # driver.h: the ibv_cmd_* family returns 0 or an errno
        if k is None and re.match(r'verbs_register_driver_\d+$', name):
            k = 'void'
        if k is None:
            unknown.append(name)
            k = 'int'
        ctype, value = RETURNS[k]
        if a.errno_minus1 and k in ('int', 'zero'):
            value = '-1'
            ctype = 'long' if k == 'zero' else 'int'
        cname = 'rocemu_compat_%s_%s' % (name, c_ident(ver)) if hidden else name
        body = 'errno = EOPNOTSUPP; return%s;' % ('' if value is None else ' ' + value)
        out.append('__attribute__((visibility("default"))) %s %s(void);' % (ctype, cname))
        out.append('%s %s(void) { %s }' % (ctype, cname, body))
        sep = '@' if hidden else '@@@'
        out.append('__asm__(".symver %s, %s%s%s");' % (cname, name, sep, ver))
    with open(a.stubs, 'w') as f:
        f.write('\n'.join(out) + '\n')
    for n in unknown:
        print('gen_abi: note: return type of %s unknown, its stub returns int EOPNOTSUPP' % n,
              file=sys.stderr)

    # symver header for hand-implemented names.
    out = ['/* Generated by gen_abi.py from %s: do not edit. */' % lib,
           '#ifndef ROCEMU_ABI_SYMVER_H', '#define ROCEMU_ABI_SYMVER_H']
    for name in sorted(hand):
        if name in default_ver:
            out.append('#define ROCEMU_SYMVER_%s __asm__(".symver %s, %s@@@%s");'
                       % (name, name, name, default_ver[name]))
        else:
            out.append('/* %s: not exported by the installed %s */' % (name, a.soname))
            out.append('#define ROCEMU_SYMVER_%s' % name)
    out.append('#endif')
    with open(a.symver, 'w') as f:
        f.write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
