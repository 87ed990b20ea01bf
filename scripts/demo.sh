#!/usr/bin/env bash
# Sets up kiln on a fresh Debian 12 machine and runs the demo (the main job).
set -euo pipefail
cd "$(dirname "$0")/.."
# The default corpus: Sherlock Holmes and Newton's Opticks, shipped as test data by these packages;
# Fashion-MNIST (IDX files read by kiln::data::MnistDataset) from dataset-fashion-mnist.
bash scripts/install_deps.sh golang-github-pierrec-lz4-dev golang-github-andybalholm-brotli-dev \
  dataset-fashion-mnist
bash scripts/build.sh release kiln_cli
./build/release/kiln info
./build/release/kiln demo "$@"
