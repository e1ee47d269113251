#!/usr/bin/env bash
# Installs what gmlp needs on a fresh Debian bookworm machine; quiet and quick when all is there.
#   scripts/setup.sh                   build dependencies (Debian packages)
#   scripts/setup.sh --python          also what the tests need: clang-14 with its libFuzzer,
#                                      sanitizer and OpenMP runtimes (make test's fuzz smoke run,
#                                      make fuzz), clang-format-14 (make test's format check), and
#                                      the Python packages (torch, timm, onnx, ...:
#                                      tests/requirements.txt) in the virtual environment .venv/
#   scripts/setup.sh --bench           also make bench's (ONNX Runtime, ...: bench/requirements.txt)
#                                      and wrk, the HTTP load generator of bench/serve_load.py
#   scripts/setup.sh --tidy            also clang-tidy-14 (make tidy)
#   scripts/setup.sh --text-baselines  only scikit-learn and numpy, for scripts/text_baselines.py
#                                      (scripts/requirements.txt)
# Python packages go into .venv/ (python3 -m venv), never into the system's Python, which Debian
# keeps for its own packages (PEP 668). Each requirements file pins its packages' whole closure and
# is installed with --no-deps; a stamp in .venv/ records each installed file's hash, so a second
# run downloads nothing. PYTHON names the interpreter that makes the venv (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv

mode=${1:-}
case "$mode" in
  "") reqs=() ;;
  --python) reqs=(tests/requirements.txt) ;;
  --bench) reqs=(tests/requirements.txt bench/requirements.txt) ;;
  --tidy) reqs=() ;;
  --text-baselines) reqs=(scripts/requirements.txt) ;;
  *) echo "setup: unknown option '$mode': expected --python, --bench, --tidy or --text-baselines" >&2; exit 2 ;;
esac

debs=(build-essential cmake pkg-config zlib1g-dev libpng-dev libjpeg62-turbo-dev libdnnl-dev nlohmann-json3-dev libcli11-dev
      libstb-dev libgtest-dev libbenchmark-dev dataset-fashion-mnist
      libsentencepiece-dev bible-kjv libcpp-httplib-dev openmpi-bin libopenmpi-dev)
case "$mode" in --python | --bench) debs+=(clang-14 libclang-rt-14-dev libomp-14-dev clang-format-14) ;; esac
[ "$mode" = --tidy ] && debs+=(clang-tidy-14)
# bench/serve_load.py's load generator.
[ "$mode" = --bench ] && debs+=(wrk)
# Debian's python3 makes a venv only with python3-venv (ensurepip); another python3 brings its own.
if [ ${#reqs[@]} -gt 0 ] && ! "${PYTHON:-python3}" -c "import ensurepip, venv" 2>/dev/null; then
  debs+=(python3 python3-venv)
fi
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
[ ${#reqs[@]} -eq 0 ] && exit 0

# A venv whose interpreter no longer runs (its base Python was removed or upgraded) is remade.
if [ -d "$VENV" ] && ! "$VENV/bin/python" -c "" 2>/dev/null; then
  echo "setup: $VENV/ does not run any more; making it afresh" >&2
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  PY=${PYTHON:-python3}
  echo "setup: creating the virtual environment $VENV/ with $("$PY" --version 2>&1) ($(command -v "$PY"))" >&2
  "$PY" -m venv "$VENV"
fi

for req in "${reqs[@]}"; do
  stamp="$VENV/.installed-$(basename "$(dirname "$req")")-$(basename "$req")"
  hash=$(sha256sum "$req" | cut -d' ' -f1)
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] && continue
  size=$(sed -n 's/^# download: //p' "$req")
  echo "setup: installing $req into $VENV/ from PyPI (${size:-size unknown} to download):" >&2
  grep -v '^\s*#' "$req" | grep -v '^\s*$' | tr '\n' ' ' | fold -s -w 96 | sed 's/^/         /' >&2
  echo >&2
  log=$(mktemp)
  # One line per file pip fetches, so that a long download shows its progress.
  if ! "$VENV/bin/python" -m pip install --no-deps --only-binary=:all: --disable-pip-version-check \
         --progress-bar off -r "$req" 2>&1 | tee "$log" |
       { grep --line-buffered -E '^\s*(Downloading|Using cached) ' || true; } | sed -u 's/^\s*/         /' >&2; then
    tail -5 "$log" >&2
    rm -f "$log"
    echo "setup: installing $req into $VENV/ failed (pip's last lines above)" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$hash" >"$stamp"
done
