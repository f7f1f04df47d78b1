#!/usr/bin/env python3
"""Sum meson's testlog.json files into one closing line: N passed, N failed, N skipped."""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        continue
    for t in lines:
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
            print(f"skipped: {t.get('name')}: {t.get('stdout', '').strip().splitlines()[-1:] }")
        else:
            failed += 1
            print(f"failed: {t.get('name')} ({r})")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
