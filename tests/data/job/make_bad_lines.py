#!/usr/bin/env python3
"""Writes bad_lines.jsonl and bad_lines.expected.tsv, the request-parsing corpus of job_test.

Lines are raw bytes so that the corpus can hold what editors and JSON libraries refuse to
write: invalid UTF-8, raw NUL bytes, a BOM, CRLF endings, no final newline. The .tsv lists,
for every line that is not blank, its line number, the expected error code ("ok" for a line
that parses), the custom_id the result must carry, and a piece of text the error message must
contain. Run it from anywhere; it writes next to itself.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def obj(**fields):
    return json.dumps(fields, ensure_ascii=False).encode("utf-8")


# (raw line without its newline, code, custom_id, message piece). code None: a blank line.
CASES = [
    (b"\xef\xbb\xbf" + obj(custom_id="good-bom", prompt="Hello") + b"\r", "ok", "good-bom", ""),
    (obj(custom_id="good-all", prompt="Write a haiku", max_tokens=32, temperature=0.7,
         top_p=0.9, top_k=40, seed=1234, stop=["\n\n", "END"], ignore_eos=True),
     "ok", "good-all", ""),
    (b"", None, "", ""),
    (b'{"custom_id": "bad-json", "prompt": "x"', "invalid_json", "", "syntax error"),
    (b'["a", "b"]', "not_an_object", "", "array"),
    (b"42", "not_an_object", "", "number"),
    (b'"just a string"', "not_an_object", "", "string"),
    (obj(prompt="no id"), "invalid_custom_id", "", "missing"),
    (b'{"custom_id": 7, "prompt": "x"}', "invalid_custom_id", "", "must be a string"),
    (obj(custom_id="", prompt="x"), "invalid_custom_id", "", "empty"),
    (obj(custom_id="i" * 600, prompt="x"), "invalid_custom_id", "", "512"),
    (obj(custom_id="no-prompt"), "missing_prompt", "no-prompt", "\"prompt\" is missing"),
    (obj(custom_id="prompt-number", prompt=5), "invalid_field", "prompt-number",
     "\"prompt\" must be a string"),
    (obj(custom_id="prompt-array", prompt=["a", "b"]), "invalid_field", "prompt-array",
     "\"prompt\" must be a string, got an array"),
    (obj(custom_id="empty-prompt", prompt=""), "empty_prompt", "empty-prompt", "empty"),
    (obj(custom_id="mt-neg", prompt="x", max_tokens=-5), "invalid_max_tokens", "mt-neg",
     "got -5"),
    (obj(custom_id="mt-zero", prompt="x", max_tokens=0), "invalid_max_tokens", "mt-zero",
     "[1, 1048576]"),
    (obj(custom_id="mt-frac", prompt="x", max_tokens=1.5), "invalid_max_tokens", "mt-frac",
     "got 1.5"),
    (obj(custom_id="mt-string", prompt="x", max_tokens="32"), "invalid_max_tokens", "mt-string",
     "got a string"),
    (obj(custom_id="mt-huge", prompt="x", max_tokens=2000000), "invalid_max_tokens", "mt-huge",
     "got 2000000"),
    (obj(custom_id="temp-neg", prompt="x", temperature=-1), "invalid_field", "temp-neg",
     "\"temperature\" must be a number in [0, 2], got -1"),
    (obj(custom_id="temp-high", prompt="x", temperature=5), "invalid_field", "temp-high",
     "\"temperature\""),
    (obj(custom_id="temp-string", prompt="x", temperature="0.5"), "invalid_field", "temp-string",
     "\"temperature\""),
    (obj(custom_id="top-p-zero", prompt="x", top_p=0), "invalid_field", "top-p-zero",
     "\"top_p\" must be a number in (0, 1]"),
    (obj(custom_id="top-p-high", prompt="x", top_p=1.5), "invalid_field", "top-p-high",
     "\"top_p\""),
    (obj(custom_id="top-k-neg", prompt="x", top_k=-5), "invalid_field", "top-k-neg",
     "\"top_k\" must be an integer >= -1"),
    (obj(custom_id="top-k-float", prompt="x", top_k=40.0), "invalid_field", "top-k-float",
     "\"top_k\""),
    (obj(custom_id="seed-neg", prompt="x", seed=-1), "invalid_field", "seed-neg", "\"seed\""),
    (obj(custom_id="seed-frac", prompt="x", seed=1.5), "invalid_field", "seed-frac", "\"seed\""),
    (obj(custom_id="stop-five", prompt="x", stop=["a", "b", "c", "d", "e"]), "invalid_field",
     "stop-five", "at most 4"),
    (obj(custom_id="stop-number", prompt="x", stop=3), "invalid_field", "stop-number",
     "\"stop\""),
    (obj(custom_id="stop-empty", prompt="x", stop=[""]), "invalid_field", "stop-empty",
     "empty string"),
    (obj(custom_id="eos-yes", prompt="x", ignore_eos="yes"), "invalid_field", "eos-yes",
     "\"ignore_eos\" must be true or false"),
    (b'{"custom_id": "utf8-prompt", "prompt": "caf\xff\xfe"}', "invalid_utf8", "utf8-prompt",
     "0xFF"),
    (b'{"custom_id": "utf8-overlong", "prompt": "\xc0\xaf"}', "invalid_utf8", "utf8-overlong",
     "0xC0"),
    (b'{"custom_id": "utf8-surrogate", "prompt": "\xed\xa0\x80"}', "invalid_utf8",
     "utf8-surrogate", "0xED"),
    (b'{"custom_id": "id-\xff", "prompt": "x"}', "invalid_utf8", "", "UTF-8"),
    (b'{"custom_id": "nul-escaped", "prompt": "a\\u0000b"}', "invalid_field", "nul-escaped",
     "NUL"),
    (b'{"custom_id": "nul-raw", "prompt": "a\x00b"}', "invalid_json", "nul-raw",
     "raw NUL byte"),
    (b'{"custom_id": "id\\u0000", "prompt": "x"}', "invalid_custom_id", "", "NUL"),
    (b'{"custom_id": "lone-surrogate", "prompt": "\\ud800"}', "invalid_json", "", "surrogate"),
    (obj(custom_id="trailing", prompt="x") + b" extra", "invalid_json", "", "syntax error"),
    (b"   \t", None, "", ""),
    (obj(custom_id="good-crlf", prompt="Windows line") + b"\r", "ok", "good-crlf", ""),
    (obj(custom_id="good-nulls", prompt="x", seed=None, stop=None, top_k=None), "ok",
     "good-nulls", ""),
    (obj(custom_id="good-unknown", prompt="x", model="opt-125m", logprobs=3), "ok",
     "good-unknown", ""),
    (obj(custom_id="good-unicode", prompt="héllo 世界 🎉", stop="\n"), "ok", "good-unicode", ""),
    (b"", None, "", ""),
    (obj(custom_id="good-last", prompt="no final newline"), "ok", "good-last", ""),
]


def main():
    lines = [c[0] for c in CASES]
    with open(os.path.join(HERE, "bad_lines.jsonl"), "wb") as f:
        f.write(b"\n".join(lines))  # no newline after the last line, on purpose
    with open(os.path.join(HERE, "bad_lines.expected.tsv"), "w", encoding="utf-8") as f:
        f.write("# line\tcode\tcustom_id\tmessage contains\n")
        for number, (_, code, custom_id, piece) in enumerate(CASES, start=1):
            if code is not None:
                f.write(f"{number}\t{code}\t{custom_id}\t{piece}\n")


if __name__ == "__main__":
    main()
