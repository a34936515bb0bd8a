#!/usr/bin/env python3
"""Writes tests/data/tokenizer/spm_golden.json: golden data for a SentencePiece (Llama-2 style, "SPM")
tokenizer as llama.cpp reads one from a GGUF file (tokenizer.ggml.model "llama": tokens, scores and
token types, no merges), with the `sentencepiece` library as the independent reference.

(a) Trains a small SentencePiece BPE model with the sentencepiece library (0.2.3 was used) on the
    training text of make_tokenizer_golden.py, split into lines, with the options of Llama 2's
    tokenizer.model: byte_fallback, identity normalization, add_dummy_prefix, no removal of extra
    whitespace, split_digits, whitespace-only pieces, unk 0, bos 1, eos 2, no pad. The character
    coverage (0.99) is low enough that some characters of the hard strings (the newline, "²³½",
    some CJK, emoji, a few ASCII letters) are not pieces and go through byte fallback. The model is
    trained twice in memory and must come out byte-identical; it is also written as
    tests/data/tokenizer/spm_style/tokenizer.model (what a Hugging Face directory ships).
(b) Exports the vocabulary as GGUF carries it: "tokens" (pieces by id, "▁" for spaces, "<0xXX>" for
    the byte pieces), "scores", "types" (GGUF token types: 1 normal, 2 unknown, 3 control,
    4 user-defined, 5 unused, 6 byte), the special ids and "add_space_prefix", and "cases": for
    every hard string of make_tokenizer_golden.py plus SPM_EXTRA, the ids of sp.encode (no BOS),
    sp.decode of those ids and whether that gives the text back ("roundtrip"; decode drops the
    dummy prefix, and a literal "▁" in the text comes back as a space).
(c) Checks every case against a pure-Python port of llama.cpp's SPM tokenizer
    (llm_tokenizer_spm_session::tokenize in src/llama-vocab.cpp, with the space prefix and the
    whitespace escaping of llama_vocab::impl::tokenize), which reads only tokens, scores and types,
    so the file checks llama.cpp's algorithm on this vocabulary independently of any C++.

Usage: /opt/fixenv/bin/python scripts/make_spm_golden.py
"""

import heapq
import io
import json
import os
import pathlib
import sys

import sentencepiece as spm

sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_tokenizer_golden import HARD_STRINGS, training_corpus  # noqa: E402  (no side effects on import)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "tokenizer" / "spm_golden.json"
# The trained model itself, as a Hugging Face directory of a Llama 2 style model ships it.
MODEL_OUT = ROOT / "tests" / "data" / "tokenizer" / "spm_style" / "tokenizer.model"

# More strings for SentencePiece: whitespace runs, a literal "▁", a literal byte-piece name, a long word.
SPM_EXTRA = [
    "    ",
    "\n",
    "x    y",
    "  a  b  ",
    "hello\u2581world",
    "\u2581\u2581lead",
    "<0x41> <0x0A>",
    "0123456789 9876543210",
    "supercalifragilisticexpialidocious",
    "The The the THE tHe",
]

TRAINER_OPTIONS = dict(
    model_type="bpe",
    vocab_size=600,
    byte_fallback=True,
    normalization_rule_name="identity",
    add_dummy_prefix=True,
    remove_extra_whitespaces=False,
    split_digits=True,
    allow_whitespace_only_pieces=True,
    split_by_unicode_script=True,
    split_by_whitespace=True,
    max_sentencepiece_length=16,
    character_coverage=0.99,
    unk_id=0,
    bos_id=1,
    eos_id=2,
    pad_id=-1,
    num_threads=1,
    shuffle_input_sentence=False,
    input_sentence_size=0,
)

# GGUF token types (llama_token_type), which are sentencepiece's ModelProto.SentencePiece.Type values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def train():
    """The serialized model proto."""
    lines = [line for text in training_corpus() for line in text.splitlines() if line.strip()]
    writer = io.BytesIO()
    with open(os.devnull, "w") as log:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=writer, logstream=log, **TRAINER_OPTIONS)
    return writer.getvalue()


def token_type(sp, i):
    if sp.is_unknown(i):
        return UNKNOWN
    if sp.is_control(i):
        return CONTROL
    if sp.is_unused(i):
        return UNUSED
    if sp.is_byte(i):
        return BYTE
    return NORMAL  # no user-defined symbols in this model


# --- llama.cpp's SPM tokenizer in Python -------------------------------------------------------------


def unicode_len_utf8(byte):
    """llama.cpp's unicode_len_utf8: the length of a UTF-8 sequence from its first byte."""
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[byte >> 4]


class LlamaCppSpm:
    """llama_vocab::impl::tokenize for LLAMA_VOCAB_TYPE_SPM on one raw-text fragment (no BOS, no
    special-token partition), with llm_tokenizer_spm_session::tokenize doing the work."""

    def __init__(self, tokens, scores, add_space_prefix):
        self.token_to_id = {}
        for i, t in enumerate(tokens):
            self.token_to_id[t.encode("utf-8")] = i  # as llama.cpp builds it: a later duplicate wins
        self.scores = scores
        self.add_space_prefix = add_space_prefix

    def byte_to_token(self, b):
        tid = self.token_to_id.get(("<0x%02X>" % b).encode("ascii"))
        return tid if tid is not None else self.token_to_id[bytes([b])]

    def tokenize(self, raw):
        if raw == "":
            return []  # llama.cpp makes no fragment from an empty text
        text = (" " + raw) if self.add_space_prefix else raw  # the first fragment follows "a special token"
        data = text.replace(" ", "\u2581").encode("utf-8")  # llama_escape_whitespace

        # Symbols: [offset, n, prev, next], one per UTF-8 character.
        symbols = []
        offs = 0
        while offs < len(data):
            n = min(unicode_len_utf8(data[offs]), len(data) - offs)
            index = len(symbols)
            offs += n
            symbols.append([offs - n, n, index - 1, -1 if offs == len(data) else index + 1])

        queue = []  # max-heap on score, then the smaller left index: (-score, left, seq, right, size)
        rev_merge = {}
        seq = [0]

        def try_add_bigram(left, right):
            if left == -1 or right == -1:
                return
            start = symbols[left][0]
            text = data[start : start + symbols[left][1] + symbols[right][1]]
            tid = self.token_to_id.get(text)
            if tid is None:
                return
            heapq.heappush(queue, (-self.scores[tid], left, seq[0], right, len(text)))
            seq[0] += 1
            rev_merge[text] = (left, right)

        for i in range(1, len(symbols)):
            try_add_bigram(i - 1, i)

        while queue:
            _, left, _, right, size = heapq.heappop(queue)
            ls, rs = symbols[left], symbols[right]
            if ls[1] == 0 or rs[1] == 0 or ls[1] + rs[1] != size:
                continue
            ls[1] += rs[1]
            rs[1] = 0
            ls[3] = rs[3]
            if rs[3] >= 0:
                symbols[rs[3]][2] = left
            try_add_bigram(ls[2], left)
            try_add_bigram(left, ls[3])

        output = []

        def resegment(symbol, depth=0):
            if depth > len(symbols):
                raise RuntimeError("resegment does not terminate")
            text = data[symbol[0] : symbol[0] + symbol[1]]
            tid = self.token_to_id.get(text)
            if tid is not None:
                output.append(tid)
                return
            parts = rev_merge.get(text)
            if parts is None:
                output.extend(self.byte_to_token(b) for b in text)
                return
            resegment(symbols[parts[0]], depth + 1)
            resegment(symbols[parts[1]], depth + 1)

        i = 0
        while i != -1:
            resegment(symbols[i])
            i = symbols[i][3]
        return output


# -----------------------------------------------------------------------------------------------------


def write_json(path, obj):
    """Indented JSON with each list of numbers on one line (compact if it gets large)."""
    import re

    text = json.dumps(obj, ensure_ascii=False, indent=1)
    number = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
    text = re.sub(
        r"\[\s*(%s(?:,\s*%s)*)\s*\]" % (number, number), lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text
    )
    if len(text.encode("utf-8")) > 200_000:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def main():
    proto = train()
    assert train() == proto, "two trainings gave different models"
    sp = spm.SentencePieceProcessor(model_proto=proto)
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [float(sp.get_score(i)) for i in range(n)]
    types = [token_type(sp, i) for i in range(n)]

    byte_pieces = [tokens[i] for i in range(n) if types[i] == BYTE]
    assert byte_pieces == ["<0x%02X>" % b for b in range(256)], "byte pieces are not <0x00>..<0xFF>"
    assert len(set(tokens)) == n, "duplicate pieces"
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 2, -1)
    assert types[0] == UNKNOWN and types[1] == CONTROL and types[2] == CONTROL

    strings = list(dict.fromkeys(HARD_STRINGS + SPM_EXTRA))
    llama_cpp = LlamaCppSpm(tokens, scores, add_space_prefix=True)
    cases, mismatches = [], []
    for s in strings:
        ids = sp.encode(s, out_type=int)
        decoded = sp.decode(ids)
        cases.append({"text": s, "ids": ids, "decoded": decoded, "roundtrip": decoded == s})
        ported = llama_cpp.tokenize(s)
        if ported != ids:
            mismatches.append((s, ids, ported))

    byte_cases = [c for c in cases if any(types[i] == BYTE for i in c["ids"])]
    assert len(byte_cases) >= 3, "fewer than 3 cases use byte fallback"
    assert any("  " in c["text"] for c in cases), "no case with a run of spaces"
    assert all(c["roundtrip"] for c in cases if "\u2581" not in c["text"]), "sentencepiece does not round-trip"
    for s, ids, ported in mismatches:
        print("llama.cpp port differs on %r:\n  sentencepiece %s\n  llama.cpp     %s" % (s, ids, ported))
    assert not mismatches, "the llama.cpp port disagrees with sentencepiece"

    golden = {
        "reference": "sentencepiece %s" % spm.__version__,
        "model": "llama",
        "tokens": tokens,
        "scores": scores,
        "types": types,
        "bos_id": sp.bos_id(),
        "eos_id": sp.eos_id(),
        "unk_id": sp.unk_id(),
        "add_space_prefix": True,
        "cases": cases,
    }
    write_json(OUT, golden)
    MODEL_OUT.parent.mkdir(parents=True, exist_ok=True)
    MODEL_OUT.write_bytes(proto)
    print(
        "%s: %d pieces, %d cases, %d with byte fallback, %d not round-tripping, llama.cpp port agrees on all"
        % (OUT.relative_to(ROOT), n, len(cases), len(byte_cases), sum(not c["roundtrip"] for c in cases))
    )


if __name__ == "__main__":
    main()
