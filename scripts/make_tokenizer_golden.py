#!/usr/bin/env python3
"""Writes the tokenizer golden data under tests/data/tokenizer/ with Hugging Face tokenizers and
transformers as the independent reference.

(a) Trains three small byte-level BPE tokenizers with the `tokenizers` library: GPT-2 style
    (ByteLevel pre-tokenizer, tokenizer_config.json with add_bos_token), Llama-3 style (Split on
    the Llama-3 regex + ByteLevel(use_regex=False), ignore_merges, "<|begin_of_text|> $A"
    template, added tokens with lstrip/rstrip/single_word/normalized) and Qwen2 style (Qwen2's
    tokenizer.json pipeline: NFC normalizer, Split on the Qwen2 regex, which is the Llama-3 one
    with single digits \p{N} instead of \p{N}{1,3}, + ByteLevel(use_regex=False), merges applied
    (ignore_merges false), a ByteLevel post-processor that adds no BOS, no tokenizer_config.json).
    Records ids for a set of hard strings, also for pre-tokenizer variants of the GPT-2 one
    (Digits, Split behaviours).
    The Qwen2 style entry also has "gguf_cases": the ids of the same vocab and merges with no
    normalizer, which is what llama.cpp does for a Qwen2 GGUF (its "qwen2" pre-tokenizer has the
    regex but no NFC step). The two lists can differ only for strings that NFC changes (decomposed
    accents and the like); on a string already in NFC they are equal.
(b) Loads the default model's tokenizer from its GGUF through transformers and records its ids,
    next to the ids of llama.cpp's "smollm" pre-tokenizer (Digits(individual_digits) then GPT-2's
    regex), which transformers' GGUF conversion does not apply; strata matches llama.cpp.

Usage: /opt/fixenv/bin/python scripts/make_tokenizer_golden.py [--gguf PATH]
"""

import argparse
import copy
import json
import os
import pathlib
import re

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "tokenizer"

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2's split: the Llama-3 one with single digits.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

HARD_STRINGS = [
    "",
    " ",
    "a",
    "hello world",
    "Hello, World!",
    "a  b",
    "a   b    c",
    "\n\n\t  x",
    "trailing spaces   ",
    "  leading spaces",
    "line1\nline2\r\nline3\n\n\n",
    "tabs\tand\tmore\t\t",
    "12345",
    "3.14159",
    "1,000,000",
    "a  1",
    "\n\n1",
    "x  123 y\t\t456",
    "version 2.0.1-rc3 (build 20240601)",
    "1st 2nd 3rd 4th ²³ ½",
    "don't",
    "I'LL",
    "we're they've she'd you'll I'm it's",
    "WE'RE THEY'VE SHE'D",
    "Hello!!! ... ??? ;-) <html><body>a&amp;b</body></html>",
    "def f(x):\n    return x**2  # square\n",
    "email: someone@example.com, url: https://example.org/a?b=c&d=e",
    "café naïve résumé",
    "Ünïcödé façade coöperate",
    "日本語のテキスト",
    "中文",
    "한국어 텍스트",
    "Привет, мир!",
    "مرحبا بالعالم",
    "👩‍👩‍👧 🎉",
    "emoji👍🏽mixed🇫🇷flags",
    "\u00a0nbsp\u3000ideographic\u2003em",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>",
    "text<|endoftext|>more",
    "<|im_start|",
    "The quick brown fox jumps over the lazy dog. It's 7:30 a.m. on 2024-06-01 and the temperature "
    "is 21.5°C; café au lait costs €3,50. 日本では「こんにちは」と言います。 Don't panic!!! 🚀🚀\n\n"
    "    indented code(x, y) -> {z: [1, 2, 3]}\n\tTabbed line with trailing space \n",
]

# Strings for the Llama-3 style file's added tokens with flags.
LLAMA3_EXTRA = [
    "<|begin_of_text|>hello",
    "a <mask> b",
    "a   <mask>   b",
    "x<mask>y",
    "<sep>   next",
    "<sep>\n\nnext",
    "cat concatenate cat. bobcat cat_x (cat)",
    "the zebra walks",
    " zebra zebras",
]

PRE_TOKENIZER_VARIANTS = {
    "byte_level_prefix_space": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "digits_individual": pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    ),
    "digits_runs": pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=False), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    ),
    "split_removed": pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    ),
    "split_merged_previous": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{P}"), behavior="merged_with_previous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    ),
    "split_merged_next": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    ),
    "split_contiguous": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="contiguous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    ),
    "split_inverted_removed": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    ),
    "split_string_prefix_space": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("e", behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
        ]
    ),
}


def training_corpus():
    """Deterministic text: the docstrings of some standard modules plus multilingual lines."""
    import collections, contextlib, io, json as json_module, re, string, textwrap

    with contextlib.redirect_stdout(io.StringIO()):
        import this  # prints the Zen of Python on import

    texts = [m.__doc__ or "" for m in (collections, json_module, re, string, textwrap, argparse, os)]
    zen = "".join(this.d.get(c, c) for c in this.s)
    texts.append(zen)
    multilingual = [
        "Le café est délicieux, naïve résumé, façade, élève, garçon.",
        "Über die Brücke gehen schöne Mädchen und Jungen.",
        "日本語のテキストを書きます。こんにちは、世界。東京は日本の首都です。",
        "中文文本，你好世界。我们喜欢学习中文。",
        "한국어 텍스트입니다. 안녕하세요 세계.",
        "Привет, мир! Как дела? Хорошо.",
        "مرحبا بالعالم",
        "Emoji 🎉🎉 👍 🚀 👩‍👩‍👧 family, 🇫🇷 flags.",
        "Numbers 123 4567 3.14159 1,000,000 2024-06-01 21.5°C €3,50.",
        "don't won't can't I'll we're they've she'd DON'T I'LL",
        "    indented code(x, y) -> {z: [1, 2, 3]}\n\tTabbed\n\n",
    ]
    return texts + multilingual * 20


def train(pre_tokenizer, special_tokens):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        min_frequency=2,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    return tok


def ids_of(tok, strings, add_special_tokens):
    return [tok.encode(s, add_special_tokens=add_special_tokens).ids for s in strings]


def decoded(tok, ids):
    return tok.decode(ids, skip_special_tokens=False)


def write_json(path, obj):
    """Indented JSON with each list of numbers on one line."""
    text = json.dumps(obj, ensure_ascii=False, indent=1)
    text = re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def make_gpt2_style():
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    directory = OUT / "gpt2_style"
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {
        "add_bos_token": True,
        "bos_token": "<|endoftext|>",
        "eos_token": {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": False, "rstrip": False,
                      "normalized": False, "single_word": False, "special": True},
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    write_json(directory / "tokenizer_config.json", config)

    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(directory))
    cases = []
    for s in HARD_STRINGS:
        plain = tok.encode(s, add_special_tokens=False).ids
        assert plain == hf.encode(s, add_special_tokens=False), s
        cases.append({"text": s, "ids": plain, "default_ids": hf.encode(s), "decoded": decoded(tok, plain)})
    base = json.loads(tok.to_str())
    variants = {}
    for name, pre in PRE_TOKENIZER_VARIANTS.items():
        variant = copy.deepcopy(base)
        variant["pre_tokenizer"] = pre if isinstance(pre, dict) else json.loads(pre.__getstate__())
        vtok = Tokenizer.from_str(json.dumps(variant))
        variants[name] = {
            "pre_tokenizer": variant["pre_tokenizer"],
            "ids": ids_of(vtok, HARD_STRINGS, add_special_tokens=False),
        }
    return {
        "file": "gpt2_style/tokenizer.json",
        "bos_id": hf.bos_token_id,
        "eos_id": hf.eos_token_id,
        "add_bos_by_default": hf.encode("a") != hf.encode("a", add_special_tokens=False),
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "cases": cases,
        "variants": variants,
    }


def make_llama3_style():
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    tok = train(pre, specials)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)])
    tok.add_special_tokens([AddedToken("<sep>", lstrip=False, rstrip=True, normalized=False, special=True)])
    tok.add_tokens([AddedToken("cat", single_word=True, normalized=True, special=False)])
    spec = json.loads(tok.to_str())
    # A word no merge sequence builds: only ignore_merges can emit it whole.
    spec["model"]["vocab"]["Ġzebra"] = max(spec["model"]["vocab"].values()) + 1
    spec["model"]["ignore_merges"] = True
    bot = tok.token_to_id("<|begin_of_text|>")
    spec["post_processor"] = json.loads(
        processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(
                    single="<|begin_of_text|> $A",
                    pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                    special_tokens=[("<|begin_of_text|>", bot)],
                ),
            ]
        ).__getstate__()
    )
    tok = Tokenizer.from_str(json.dumps(spec))
    directory = OUT / "llama3_style"
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))

    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(directory))
    strings = HARD_STRINGS + LLAMA3_EXTRA
    cases = []
    for s in strings:
        plain = tok.encode(s, add_special_tokens=False).ids
        assert plain == hf.encode(s, add_special_tokens=False), s
        cases.append({"text": s, "ids": plain, "default_ids": hf.encode(s), "decoded": decoded(tok, plain)})
    zebra = tok.token_to_id("Ġzebra")
    assert zebra in tok.encode(" zebra", add_special_tokens=False).ids
    return {
        "file": "llama3_style/tokenizer.json",
        "bos_id": bot,
        "eos_id": None,
        "add_bos_by_default": True,
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "cases": cases,
    }


def make_qwen2_style():
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok = train(pre, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.normalizer = normalizers.NFC()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = False
    tok = Tokenizer.from_str(json.dumps(spec))
    assert len(tok.pre_tokenizer.pre_tokenize_str("12345")) == 5
    directory = OUT / "qwen2_style"
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))

    # llama.cpp's "qwen2" pre-tokenizer: the same regex, no NFC normalizer.
    spec["normalizer"] = None
    gguf = Tokenizer.from_str(json.dumps(spec))

    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(directory))
    cases, gguf_cases = [], []
    for s in HARD_STRINGS:
        plain = tok.encode(s, add_special_tokens=False).ids
        assert plain == hf.encode(s, add_special_tokens=False), s
        assert hf.encode(s) == plain, s  # nothing is added by default
        cases.append({"text": s, "ids": plain, "default_ids": hf.encode(s), "decoded": decoded(tok, plain)})
        gguf_cases.append({"text": s, "ids": gguf.encode(s, add_special_tokens=False).ids})
    assert hf.bos_token_id is None
    return {
        "file": "qwen2_style/tokenizer.json",
        "bos_id": -1,
        "eos_id": None,
        "add_bos_by_default": False,
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "cases": cases,
        "gguf_cases": gguf_cases,
    }


def make_smollm2(gguf_path):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path))
    backend = json.loads(hf.backend_tokenizer.to_str())
    # llama.cpp's "smollm" pre-tokenizer, which is also the pre_tokenizer of SmolLM2's own
    # tokenizer.json on the Hugging Face hub.
    smollm = copy.deepcopy(backend)
    smollm["pre_tokenizer"] = json.loads(
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
            ]
        ).__getstate__()
    )
    reference = Tokenizer.from_str(json.dumps(smollm))
    cases, disagreements = [], []
    for s in HARD_STRINGS:
        ids = reference.encode(s, add_special_tokens=False).ids
        transformers_ids = hf.encode(s, add_special_tokens=False)
        cases.append(
            {
                "text": s,
                "ids": ids,
                "transformers_gguf_ids": transformers_ids,
                "transformers_default_ids": hf.encode(s),
                "decoded": reference.decode(ids, skip_special_tokens=False),
            }
        )
        if ids != transformers_ids:
            disagreements.append(s)
    return {
        "file": os.path.basename(gguf_path),
        "matched": "llama.cpp 'smollm' pre-tokenizer: Digits(individual_digits) then GPT-2 regex",
        "transformers_pre_tokenizer": backend["pre_tokenizer"],
        "transformers_disagrees_on": disagreements,
        "bos_id": hf.bos_token_id,
        "eos_id": hf.eos_token_id,
        "add_bos_by_default": any(c["transformers_default_ids"] != c["transformers_gguf_ids"] for c in cases),
        "vocab_size": len(hf),
        "cases": cases,
    }


def main():
    cache = os.environ.get("STRATA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "strata"
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default=os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = parser.parse_args()
    golden = {
        "gpt2_style": make_gpt2_style(),
        "llama3_style": make_llama3_style(),
        "qwen2_style": make_qwen2_style(),
    }
    write_json(OUT / "bpe_golden.json", golden)
    smollm2 = make_smollm2(args.gguf)
    write_json(OUT / "smollm2_golden.json", smollm2)
    print("transformers' GGUF tokenizer disagrees with llama.cpp's 'smollm' on:")
    for s in smollm2["transformers_disagrees_on"]:
        print("  ", repr(s))


if __name__ == "__main__":
    main()
