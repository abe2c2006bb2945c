#!/usr/bin/env python3
"""Regenerates sdk/abi/src/commands.rs (ABI command ids) from host/model/src/command/generated.rs.
ABI v1 ids must never change: this script is for the first generation and for checking."""
import re, sys, pathlib
root = pathlib.Path(__file__).resolve().parent.parent
src = (root / "host/model/src/command/generated.rs").read_text()
names = sorted(re.findall(r'^    RawCommand \{\n        name: "([^"]+)"', src, re.M), key=str.encode)
cur = re.findall(r'^    "([^"]+)",', (root / "sdk/abi/src/commands.rs").read_text(), re.M)
missing = [n for n in names if n not in cur]
if missing:
    sys.exit(f"commands not in ABI v1 (append them by hand, never reorder): {missing}")
print(f"ABI command list covers all {len(names)} commands")
