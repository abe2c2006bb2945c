#!/usr/bin/env bash
# Installs the pinned Zig (PyPI package ziglang) into sdk/c/.zig, once; tessera-cc uses it.
#   sdk/c/install-zig.sh
set -euo pipefail
ZIG_VERSION=0.17.0
sdk="$(cd "$(dirname "$0")" && pwd)"
if [ -d "$sdk/.zig/ziglang-$ZIG_VERSION.dist-info" ]; then exit 0; fi
rm -rf "$sdk/.zig"
python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --root-user-action=ignore --target "$sdk/.zig" "ziglang==$ZIG_VERSION"
