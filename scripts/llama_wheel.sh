#!/usr/bin/env bash
# Build llama-cpp-python once, portably, into a project-local wheelhouse, and print its folder.
#
# pip's default build turns on GGML_NATIVE, which compiles for the build machine's CPU: a
# wheel built where the CPU reports AMX or AVX-512 dies of SIGILL on one that lacks them (or
# inside a VM that hides them). And pip caches that wheel and hands it to every later install.
# So the CPU features are pinned to a baseline every x86-64 machine of the last decade has,
# the wheel is built with pip's cache off, and it lives in .wheelhouse/ under a name that
# carries the version and a hash of the flags: change either and a fresh wheel is built.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION="${LLAMA_VERSION:-0.3.36}"
if [ "$(uname -m)" = x86_64 ]; then
  LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
  LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF"
fi
tag=$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)
house=".wheelhouse/llama-cpp-python-$LLAMA_VERSION-$tag"

if ! ls "$house"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  mkdir -p "$house"
  printf '%s\n' "$LLAMA_CMAKE_ARGS" >"$house/CMAKE_ARGS"
  printf '%s\n' "$LLAMA_VERSION" >"$house/VERSION"
  echo "building llama-cpp-python $LLAMA_VERSION without native CPU features (about 9 minutes on 2 cores)" >&2
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" FORCE_CMAKE=1 "${PYTHON:-.venv/bin/python}" -m pip wheel -q \
    --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$house.partial" \
    "llama-cpp-python==$LLAMA_VERSION" >&2
  mv "$house.partial"/llama_cpp_python-*.whl "$house/"
  rm -rf "$house.partial"
fi
echo "$house"
