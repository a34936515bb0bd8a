#!/usr/bin/env bash
# One command from a fresh Debian machine to real completions: installs the dependencies, fetches
# the default model, builds strata and runs a batch job over examples/prompts.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p out
rm -f out/demo.jsonl
build/strata run --input examples/prompts.jsonl --output out/demo.jsonl
echo
echo "demo: completions written to out/demo.jsonl:"
cat out/demo.jsonl
