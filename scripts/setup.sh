#!/usr/bin/env bash
# Installs what gmlp needs on a fresh Debian bookworm machine; quiet and quick when all is there.
#   scripts/setup.sh          build dependencies (Debian packages)
#   scripts/setup.sh --python also the PyPI packages the tests use (torch, timm, ...)
#   scripts/setup.sh --bench  also those the baselines of `make bench` use (ONNX Runtime, ...) (onnxruntime,
#                             onnx and onnxscript for the ONNX Runtime column of make bench)
#   scripts/setup.sh --text-baselines  scikit-learn, for scripts/text_baselines.py
set -euo pipefail

debs=(build-essential cmake pkg-config zlib1g-dev libdnnl-dev nlohmann-json3-dev libcli11-dev
      libstb-dev libgtest-dev libbenchmark-dev dataset-fashion-mnist
      libsentencepiece-dev bible-kjv)
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

pip_install() {  # installs the named modules' packages unless all of them import already
  local PY=${PYTHON:-python3} imports=$1
  shift
  if ! "$PY" -c "import $imports" 2>/dev/null; then
    echo "setup: installing PyPI packages: $*" >&2
    "$PY" -m pip install -q --disable-pip-version-check "$@"
  fi
}

case "${1:-}" in
  --python) pip_install "torch, timm, safetensors, numpy" torch timm safetensors numpy ;;
  --bench) pip_install "torch, timm, safetensors, numpy, onnxruntime, onnx, onnxscript" \
             torch timm safetensors numpy onnxruntime onnx onnxscript ;;
  --text-baselines) pip_install "sklearn, numpy" scikit-learn numpy ;;
esac
