# SPDX-License-Identifier: BSD-3-Clause
"""What every `rocemu inspect` test script shares: recording failures,
skipping (exit 77, counted as skipped by meson), finding the rocemu binary,
running `rocemu inspect`, and the closing verdict."""
import os
import subprocess
import sys

failures = []


def check(cond, what):
    """Record (and print) a failure unless cond holds."""
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def rocemu():
    """Path of the rocemu binary ($ROCEMU_BIN, else $ROCEMU_BUILD_DIR/tools/rocemu)."""
    b = os.environ.get("ROCEMU_BIN") or os.path.join(os.environ.get("ROCEMU_BUILD_DIR", "build"),
                                                     "tools", "rocemu")
    if not os.access(b, os.X_OK):
        skip("rocemu binary not found (%s)" % b)
    return b


def inspect(*args, timeout=120):
    """Run `rocemu inspect ARGS`; returns (exit status, stdout, stderr)."""
    p = subprocess.run([rocemu(), "inspect"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def verdict(ok_message):
    """Exit status for main(): 1 with the failure count, else 0 with ok_message."""
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print(ok_message)
    return 0
