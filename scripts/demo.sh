#!/usr/bin/env bash
# Sets up kiln on a fresh Debian 12 machine and runs the demo (the main job).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh release kiln_cli
./build/release/kiln info
./build/release/kiln demo "$@"
