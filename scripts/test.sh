#!/usr/bin/env bash
# Set up from scratch and run every check: lint, types, tests.
# Usage: bash scripts/test.sh     (creates .venv beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the end-to-end tests drive: Debian's Chromium for the web lesson, and
# espeak-ng, the voice of `ridgeline film`. Installed when missing and this runs as root.
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v espeak-ng >/dev/null 2>&1 || missing="$missing espeak-ng"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# Pyodide for the static lesson's browser test (`ridgeline web --export`): the npm package at
# the version the export pins, fetched once with `npm pack` into .cache/ (git-ignored).
pyodide_version=$(sed -n 's/^PYODIDE_VERSION = "\([^"]*\)".*/\1/p' src/ridgeline/web/export.py)
pyodide_dir=".cache/pyodide/$pyodide_version"
if [ ! -f "$pyodide_dir/package/pyodide.js" ]; then
  rm -rf "$pyodide_dir" && mkdir -p "$pyodide_dir"
  tarball="pyodide-$pyodide_version.tgz"
  if command -v npm >/dev/null 2>&1; then
    (cd "$pyodide_dir" && npm pack --silent "pyodide@$pyodide_version" >/dev/null)
  else  # no npm: the same tarball, straight from the npm registry
    python3 -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
      "https://registry.npmjs.org/pyodide/-/$tarball" "$pyodide_dir/$tarball"
  fi
  (cd "$pyodide_dir" && tar -xzf "$tarball" && rm "$tarball")
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# llama.cpp's server for the measurement tests, built once without native CPU features
# (see scripts/llama_wheel.sh) and installed from the project's own wheelhouse, never
# from pip's shared cache, which may hold a wheel built for another CPU.
house=$(bash scripts/llama_wheel.sh)
.venv/bin/python -m pip install -q --no-cache-dir --only-binary llama-cpp-python \
  --find-links "$house" "llama-cpp-python[server]==$(cat "$house/VERSION")"
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest
