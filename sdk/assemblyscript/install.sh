#!/usr/bin/env bash
# Installs the pinned AssemblyScript compiler (package-lock.json) into node_modules, once.
#   sdk/assemblyscript/install.sh
set -euo pipefail
cd "$(dirname "$0")"
want="$(node -p 'require("./package-lock.json").packages["node_modules/assemblyscript"].version')"
have="$(node -p 'try { require("./node_modules/assemblyscript/package.json").version } catch { "" }')"
[ "$want" = "$have" ] || npm ci --no-audit --no-fund --loglevel=error
