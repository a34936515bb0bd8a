#!/usr/bin/env bash
# One command from a fresh Debian machine to real completions: installs the dependencies, fetches
# the default model, builds the strata program (only it: the tests are scripts/test.sh's) and runs
# a batch job over examples/chat.jsonl, a dozen chat requests for the default instruct model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target strata
mkdir -p out
rm -f out/demo.jsonl
build/strata run --input examples/chat.jsonl --output out/demo.jsonl
echo
echo "demo: completions written to out/demo.jsonl (OpenAI batch output lines); their texts:"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    body = r["response"]["body"]
    text = body["choices"][0]["message"]["content"] if r["error"] is None else body["error"]["message"]
    print(r["custom_id"] + ": " + text)
' out/demo.jsonl
