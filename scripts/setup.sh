#!/usr/bin/env bash
# Installs what gmlp needs on a fresh Debian bookworm machine; quiet and quick when all is there.
#   scripts/setup.sh          build dependencies (Debian packages)
#   scripts/setup.sh --python also the PyPI packages the tests and baselines use (onnxruntime,
#                             onnx and onnxscript for the ONNX Runtime column of make bench)
set -euo pipefail

debs=(build-essential cmake pkg-config zlib1g-dev libdnnl-dev nlohmann-json3-dev libcli11-dev
      libstb-dev libgtest-dev libbenchmark-dev dataset-fashion-mnist)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--python" ]; then
  PY=${PYTHON:-python3}
  if ! "$PY" -c "import torch, timm, safetensors, numpy, onnxruntime, onnx, onnxscript" 2>/dev/null; then
    echo "setup: installing PyPI packages: torch timm safetensors numpy onnxruntime onnx onnxscript" >&2
    "$PY" -m pip install -q --disable-pip-version-check torch timm safetensors numpy onnxruntime onnx onnxscript
  fi
fi
