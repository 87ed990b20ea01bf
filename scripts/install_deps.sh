#!/usr/bin/env bash
# Installs what kiln needs to build and test on Debian 12 (run as root, or with sudo).
set -euo pipefail
# Extra packages can be named on the command line (the demo adds its corpus packages).
# libonnx-dev, libprotobuf-dev, protobuf-compiler: the ONNX importer (src/kiln/onnx);
# libonnx-testdata: the ONNX backend test suite that the conformance test runs.
# libopenblas-openmp-dev: LAPACK for kiln.linalg's factorisations (decision 0076).
# libdnnl-dev: oneDNN, used by the library for convolution and tall matrix products (decisions
# 0016, 0017) and called directly as the GEMM peer of `kiln bench` (tools/bench/).
# opencl-c-headers, ocl-icd-libopencl1: the xpu backend's OpenCL (decision 0086); pocl-opencl-icd:
# a CPU OpenCL driver, the xpu device of the tests on machines without a GPU.
packages=(build-essential cmake ninja-build ccache libgtest-dev pkg-config zlib1g-dev libsleef-dev libdnnl-dev
          libopenblas-openmp-dev opencl-c-headers ocl-icd-libopencl1 pocl-opencl-icd
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
