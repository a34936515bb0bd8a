"""Converts a small Hugging Face Qwen2ForCausalLM, Qwen3ForCausalLM or Phi3ForCausalLM directory
to an all-F32 GGUF file the way llama.cpp's convert_hf_to_gguf.py does for the QWEN2 / QWEN3 / PHI3
architectures, so that strata's GGUF path can be checked against the transformers reference of the
same weights (tests/data/fixtures/qwen2, qwen2-yarn, qwen3 and phi3, made by
scripts/make_fixtures.py).
The architecture follows config.json's model_type ("qwen2", "qwen3" or "phi3"). For qwen2 / qwen3
RoPE is plain, or YaRN when config.json's rope_scaling (or rope_parameters) has type / rope_type
"yarn"; any other rope scaling is refused. For phi3 only plain RoPE is covered (no rope scaling:
longrope / su / yarn are refused).

  python tests/data/gguf/hf_to_gguf.py HF_DIR OUT.gguf [--check EXPECTED_JSON]

  e.g. python tests/data/gguf/hf_to_gguf.py tests/data/fixtures/qwen2 \\
           tests/data/gguf/qwen2-tiny.gguf --check tests/data/fixtures/qwen2/expected.json
       python tests/data/gguf/hf_to_gguf.py tests/data/fixtures/qwen3 \\
           tests/data/gguf/qwen3-tiny.gguf --check tests/data/fixtures/qwen3/expected.json
       python tests/data/gguf/hf_to_gguf.py tests/data/fixtures/qwen2-yarn \\
           tests/data/gguf/qwen2-yarn-tiny.gguf --check tests/data/fixtures/qwen2-yarn/expected.json
       python tests/data/gguf/hf_to_gguf.py tests/data/fixtures/phi3 \\
           tests/data/gguf/phi3-tiny.gguf --check tests/data/fixtures/phi3/expected.json

Needs gguf (gguf-py) and numpy (--check also needs tokenizers). Reads the safetensors files
itself (F32, F16 and BF16), so it needs neither torch nor transformers.

What it writes, following convert_hf_to_gguf.py (Qwen2Model, and Qwen3Model which inherits it
with arch "qwen3"; Phi3MiniModel; TextModel, _set_vocab_gpt2):
  - general.architecture "qwen2" or "qwen3"; <arch>.context_length, embedding_length, block_count,
    feed_forward_length, attention.head_count, attention.head_count_kv, attention.key_length
    and value_length (config.json has head_dim), rope.freq_base, attention.layer_norm_rms_epsilon.
  - For a "yarn" rope_scaling, as Qwen2Model.set_gguf_parameters (after the keys above and
    general.file_type): <arch>.rope.scaling.type "yarn", rope.scaling.factor (factor),
    rope.scaling.original_context_length (original_max_position_embeddings), and
    rope.scaling.yarn_beta_fast / yarn_beta_slow only where rope_scaling has beta_fast /
    beta_slow. No attn_factor keys: a rope_scaling with attention_factor, mscale,
    mscale_all_dim, truncate or any other key is refused, as is one without factor or
    original_max_position_embeddings. Without rope scaling no rope.scaling.* key is written.
  - Every tensor as F32 (bf16/fp16 upcast exactly), in HF's [out, in] row-major layout (gguf-py
    records ne reversed). q/k are NOT permuted: unlike LlamaModel, Qwen2Model keeps HF's
    rotate_half (NeoX) row order and llama.cpp runs qwen2 and qwen3 with NeoX RoPE. output.weight
    only when the embeddings are not tied. Qwen2 has q/k/v biases and no o_proj bias. Qwen3 has no
    biases, and per-head q/k RMSNorm weights [head_dim] (self_attn.q_norm / k_norm ->
    blk.N.attn_q_norm / attn_k_norm); its attention width n_head * head_dim may differ from
    hidden_size.
  - For phi3, as Phi3MiniModel.set_gguf_parameters (which replaces TextModel's), in this order:
    phi3.context_length, rope.scaling.original_context_length (original_max_position_embeddings,
    required), embedding_length, feed_forward_length, block_count, attention.head_count,
    attention.head_count_kv, attention.layer_norm_rms_epsilon, rope.dimension_count
    (int(partial_rotary_factor * hidden_size) // num_attention_heads), rope.freq_base,
    general.file_type, attention.sliding_window (config.json's sliding_window, 0 when null:
    llama.cpp then runs full attention). No key_length / value_length (head_dim = hidden_size /
    heads) and no other rope.scaling.* key. Tensors keep Phi-3's FUSED projections, as llama.cpp's
    tensor map does: self_attn.qkv_proj -> blk.N.attn_qkv [q + 2 kv rows: q, then k, then v] and
    mlp.gate_up_proj -> blk.N.ffn_up [2 * intermediate rows: gate, then up]; o_proj ->
    attn_output, down_proj -> ffn_down, no biases, output.weight (untied); q/k NOT permuted
    (llama.cpp runs phi3 with NeoX RoPE).
  - tokenizer.ggml.model "gpt2", pre "qwen2" for qwen2 and qwen3 (llama.cpp gives Qwen3's
    vocabulary the qwen2 pre-tokenizer) and "gpt-2" for phi3 (llama.cpp's Phi3MiniModel takes
    _set_vocab_gpt2 for a GPT2Tokenizer vocabulary, as Phi-4's -- the phi3 fixture's
    tokenizer_config.json says PreTrainedTokenizerFast, for which llama.cpp would want a
    SentencePiece tokenizer.model instead; "gpt-2" is llama.cpp's name for GPT-2's split regex,
    which is exactly the ByteLevel(use_regex=True) split of the fixtures' shared tokenizer.json;
    "qwen2" happens to give the same ids for the five fixture prompts), tokens by id (model.vocab
    + added_tokens; ids without a token become "[PAD<id>]", type UNUSED), token_type (NORMAL,
    CONTROL for special added tokens, USER_DEFINED for other added tokens), merges "a b", bos/eos
    ids from config.json, add_bos_token / add_eos_token from tokenizer_config.json or, failing
    that, from tokenizer.json's TemplateProcessing post-processor.

The file is read back with GGUFReader and its keys, tensor shapes and values checked. With
--check, a float64 numpy forward pass of every prompt of EXPECTED_JSON ("input_ids") that uses
ONLY the tensors and keys read back from the GGUF (RMSNorm, q/k/v with bias for qwen2, per-head
q/k RMSNorm before RoPE for qwen3, for phi3 the fused attn_qkv split as transformers' Phi3Attention
does -- rows [0, q), [q, q + kv), [q + kv, q + 2 kv) -- NeoX RoPE (for phi3 on the first
rope.dimension_count dims of each head, the rest passed through), GQA causal attention scaled by
1/sqrt(head_dim) (for phi3 with a nonzero attention.sliding_window, key positions j <= i - window
masked too), SwiGLU (for phi3 gate = the first half of ffn_up's rows, up = the second half, as
transformers' chunk(2)), final norm, lm_head) is compared with the transformers logits there
(max |diff| / max |logit| must be < 1e-4), and the GGUF vocabulary with llama.cpp's split regex
for its tokenizer.ggml.pre ("qwen2" or "gpt-2") is checked to encode every prompt to its ids.
With rope.scaling.type "yarn" the RoPE frequencies and cos/sin follow transformers'
_compute_yarn_parameters, parameters taken from the GGUF keys only: correction range
[floor(d(beta_fast)), ceil(d(beta_slow))] clamped to [0, head_dim - 1], where d(r) = head_dim *
ln(orig_ctx / (2 pi r)) / (2 ln freq_base) and beta_fast / beta_slow default to 32 / 1; a linear
ramp over the head_dim/2 frequencies; inv_freq = inv_freq / factor * ramp + inv_freq * (1 - ramp);
and cos and sin multiplied by 0.1 * ln(factor) + 1 (1 when factor <= 1).
"""
import argparse
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ARCHS = ("qwen2", "qwen3", "phi3")  # config.json model_type == GGUF general.architecture
# llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2 split regex (src/llama-vocab.cpp), as in
# transformers' Qwen2Tokenizer.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2 split regex (src/llama-vocab.cpp), GPT-2's pattern.
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
# tokenizer.ggml.pre written per architecture, and the split regex of each pre name.
TOKENIZER_PRE = {"qwen2": "qwen2", "qwen3": "qwen2", "phi3": "gpt-2"}
PRE_SPLIT = {"qwen2": QWEN2_SPLIT, "gpt-2": GPT2_SPLIT}

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5

# HF parameter name (after "model.layers.N.") -> llama.cpp tensor name (after "blk.N."), per
# architecture, in the order the tensors are written within a block.
LAYER_TENSORS = {
    "qwen2": {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    },
    "qwen3": {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    },
    "phi3": {  # fused projections kept as they are (llama.cpp's tensor map)
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.qkv_proj.weight": "attn_qkv.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    },
}
GLOBAL_TENSORS = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


# --------------------------------------------------------------------------------------------
# Hugging Face side
# --------------------------------------------------------------------------------------------
def read_safetensors(path: Path) -> dict:
    """name -> float32 array of one .safetensors file (F32, F16 or BF16)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    body = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = body[begin:end]
        if info["dtype"] == "BF16":   # the high half of a float32
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif info["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4").copy()
        else:
            sys.exit(f"{path}: {name}: dtype {info['dtype']} is not supported")
        out[name] = a.reshape(info["shape"])
    return out


def read_hf_weights(hf_dir: Path) -> dict:
    index = hf_dir / "model.safetensors.index.json"
    files = (sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists()
             else ["model.safetensors"])
    weights = {}
    for f in files:
        weights.update(read_safetensors(hf_dir / f))
    return weights


def rope_theta(cfg: dict) -> float:
    if "rope_theta" in cfg:
        return float(cfg["rope_theta"])
    rp = cfg.get("rope_parameters") or {}
    return float(rp.get("rope_theta", 10000.0))


def phi3_rope_dims(cfg: dict) -> int:
    """rope.dimension_count as Phi3MiniModel computes it: int(partial_rotary_factor * n_embd) // n_head."""
    rot_pct = float(cfg.get("partial_rotary_factor", 1.0))
    return int(rot_pct * int(cfg["hidden_size"])) // int(cfg["num_attention_heads"])


def check_config(cfg: dict) -> str:
    """The architecture ("qwen2" / "qwen3" / "phi3") after checking that this converter covers cfg."""
    arch = cfg.get("model_type")
    if arch not in ARCHS:
        sys.exit(f"model_type is {arch!r}, not one of {ARCHS}")
    if arch == "phi3":
        n_embd, n_head = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        hd = n_embd // n_head
        if n_embd % n_head or cfg.get("head_dim", hd) != hd:
            sys.exit(f"phi3 with head_dim {cfg.get('head_dim')} != hidden_size / heads is not supported")
        if rope_scaling(cfg) is not None:  # rope_scaling() exits itself on anything but yarn
            sys.exit("phi3 rope scaling (longrope / su / yarn) is not supported here: plain RoPE only")
        if cfg.get("original_max_position_embeddings") is None:
            sys.exit("phi3 config.json has no original_max_position_embeddings (Phi3MiniModel needs it)")
        rope_dims = phi3_rope_dims(cfg)
        # transformers' Phi3RotaryEmbedding rotates int(head_dim * partial_rotary_factor) dims
        if rope_dims != int(hd * float(cfg.get("partial_rotary_factor", 1.0))) or rope_dims % 2:
            sys.exit(f"phi3 rotary dims {rope_dims} differ from transformers' or are odd")
        if cfg.get("tie_word_embeddings"):
            sys.exit("phi3 with tie_word_embeddings is not covered here")
        return arch
    if arch == "qwen3" and cfg.get("attention_bias"):
        sys.exit("attention_bias is true; llama.cpp's qwen3 has no q/k/v/o biases")
    if cfg.get("use_sliding_window"):
        sys.exit("use_sliding_window is true; this converter writes full attention only")
    rope_scaling(cfg)  # exits on a rope scaling this converter does not cover
    return arch


# rope_scaling keys rope_scaling() accepts for YaRN; any other (attention_factor, mscale,
# mscale_all_dim, truncate, partial_rotary_factor, ...) would change transformers' YaRN in a way
# that the keys written here do not carry.
YARN_KEYS = {"type", "rope_type", "rope_theta", "factor", "original_max_position_embeddings",
             "beta_fast", "beta_slow"}


def rope_scaling(cfg: dict):
    """None for plain RoPE, else the YaRN parameters as a dict (factor,
    original_max_position_embeddings, and beta_fast / beta_slow where config.json has them).
    Exits on any other rope scaling."""
    scaling = cfg.get("rope_scaling") or (cfg.get("rope_parameters") or {})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", None):
        return None
    if kind != "yarn":
        sys.exit(f"rope scaling type {kind!r} ({scaling}) is not supported here: "
                 f"only plain RoPE and 'yarn'")
    extra = sorted(set(scaling) - YARN_KEYS)
    if extra:
        sys.exit(f"yarn rope scaling with {extra} ({scaling}) is not supported here")
    for k in ("factor", "original_max_position_embeddings"):
        if scaling.get(k) is None:
            sys.exit(f"yarn rope scaling without {k!r} ({scaling}) is not supported here")
    if cfg.get("original_max_position_embeddings") is not None:
        # transformers would then take the top-level value over rope_scaling's
        sys.exit("a top-level original_max_position_embeddings is not supported here")
    out = {"factor": float(scaling["factor"]),
           "original_max_position_embeddings": int(scaling["original_max_position_embeddings"])}
    for k in ("beta_fast", "beta_slow"):
        if scaling.get(k) is not None:
            out[k] = float(scaling[k])
    return out


def vocab_from_tokenizer(hf_dir: Path, n_vocab: int):
    """tokens, token types and merges as _set_vocab_gpt2 writes them."""
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    if tj["model"]["type"] != "BPE":
        sys.exit(f"tokenizer model {tj['model']['type']} is not BPE")
    by_id = {i: (tok, TOKEN_NORMAL) for tok, i in tj["model"]["vocab"].items()}
    for t in tj.get("added_tokens", []):
        by_id[t["id"]] = (t["content"], TOKEN_CONTROL if t["special"] else TOKEN_USER_DEFINED)
    if max(by_id) >= n_vocab:
        sys.exit(f"tokenizer has id {max(by_id)} but the model's vocab_size is {n_vocab}")
    tokens, types = [], []
    for i in range(n_vocab):
        tok, typ = by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED))
        tokens.append(tok)
        types.append(typ)
    # Older tokenizer.json files store merges as "a b" strings, newer ones as ["a", "b"] pairs.
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
    return tj, tokens, types, merges


def adds_special(tj: dict, tc: dict, key: str, token_id, tokens):
    """Whether the tokenizer adds bos (key "bos") / eos ("eos") around a single sequence."""
    if f"add_{key}_token" in tc:
        return bool(tc[f"add_{key}_token"])
    pp = tj.get("post_processor") or {}
    procs = pp.get("processors", [pp]) if pp.get("type") == "Sequence" else [pp]
    for p in procs:
        if p.get("type") == "TemplateProcessing" and token_id is not None:
            single = p["single"]
            edge = single[0] if key == "bos" else single[-1]
            if "SpecialToken" in edge:
                return edge["SpecialToken"]["id"] == tokens[token_id]
            return False
    return False


# --------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------
def convert(hf_dir: Path, out: Path):
    cfg = json.loads((hf_dir / "config.json").read_text())
    arch = check_config(cfg)
    layer_tensors = LAYER_TENSORS[arch]
    tc_path = hf_dir / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text()) if tc_path.exists() else {}
    n_vocab = int(cfg["vocab_size"])
    n_layer = int(cfg["num_hidden_layers"])
    n_head = int(cfg["num_attention_heads"])
    n_embd = int(cfg["hidden_size"])
    tied = bool(cfg.get("tie_word_embeddings", False))

    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(hf_dir.name)
    if arch == "phi3":  # Phi3MiniModel.set_gguf_parameters replaces TextModel's, in this order
        w.add_context_length(int(cfg["max_position_embeddings"]))
        w.add_rope_scaling_orig_ctx_len(int(cfg["original_max_position_embeddings"]))
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(int(cfg["intermediate_size"]))
        w.add_block_count(n_layer)
        w.add_head_count(n_head)
        w.add_head_count_kv(int(cfg.get("num_key_value_heads") or n_head))
        w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
        w.add_rope_dimension_count(phi3_rope_dims(cfg))
        w.add_rope_freq_base(rope_theta(cfg))
        w.add_file_type(gguf.LlamaFileType.ALL_F32)
        # llama.cpp: "use zero value of sliding_window to distinguish Phi-4 from other PHI3 models"
        w.add_sliding_window(int(cfg.get("sliding_window") or 0))
    else:  # TextModel.set_gguf_parameters, then Qwen2Model's YaRN keys
        w.add_context_length(int(cfg["max_position_embeddings"]))
        w.add_embedding_length(n_embd)
        w.add_block_count(n_layer)
        w.add_feed_forward_length(int(cfg["intermediate_size"]))
        w.add_head_count(n_head)
        w.add_head_count_kv(int(cfg.get("num_key_value_heads", n_head)))
        if cfg.get("head_dim") is not None:
            w.add_key_length(int(cfg["head_dim"]))
            w.add_value_length(int(cfg["head_dim"]))
        w.add_rope_freq_base(rope_theta(cfg))
        w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
        w.add_file_type(gguf.LlamaFileType.ALL_F32)
        yarn = rope_scaling(cfg)
        if yarn is not None:  # as Qwen2Model.set_gguf_parameters, after TextModel's keys
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(yarn["factor"])
            w.add_rope_scaling_orig_ctx_len(yarn["original_max_position_embeddings"])
            if "beta_fast" in yarn:
                w.add_rope_scaling_yarn_beta_fast(yarn["beta_fast"])
            if "beta_slow" in yarn:
                w.add_rope_scaling_yarn_beta_slow(yarn["beta_slow"])

    tj, tokens, types, merges = vocab_from_tokenizer(hf_dir, n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(TOKENIZER_PRE[arch])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    bos, eos = cfg.get("bos_token_id"), cfg.get("eos_token_id")
    if bos is not None:
        w.add_bos_token_id(int(bos))
    if eos is not None:
        w.add_eos_token_id(int(eos if not isinstance(eos, list) else eos[0]))
    if cfg.get("pad_token_id") is not None:
        w.add_pad_token_id(int(cfg["pad_token_id"]))
    w.add_add_bos_token(adds_special(tj, tc, "bos", bos, tokens))
    w.add_add_eos_token(adds_special(tj, tc, "eos", eos, tokens))
    if tc.get("chat_template"):
        w.add_chat_template(tc["chat_template"])

    weights = read_hf_weights(hf_dir)
    names = {}
    for hf_name in weights:
        if hf_name in GLOBAL_TENSORS:
            names[hf_name] = GLOBAL_TENSORS[hf_name]
            continue
        parts = hf_name.split(".")
        suffix = ".".join(parts[3:])
        if parts[:2] != ["model", "layers"] or suffix not in layer_tensors:
            sys.exit(f"unexpected tensor {hf_name} for {arch}")
        names[hf_name] = f"blk.{int(parts[2])}.{layer_tensors[suffix]}"
    if tied:
        names.pop("lm_head.weight", None)  # llama.cpp uses token_embd.weight for the output
    elif "lm_head.weight" not in names:
        sys.exit("tie_word_embeddings is false but there is no lm_head.weight")
    # every tensor a block of this architecture has must be there
    want = {f"blk.{i}.{gg}" for i in range(n_layer) for gg in layer_tensors.values()}
    missing = want - set(names.values())
    if missing:
        sys.exit(f"missing tensors: {sorted(missing)}")

    def order(item):  # llama.cpp's order: token_embd, the blocks, output_norm, output
        gg = item[1]
        if gg.startswith("blk."):
            return (1, int(gg.split(".")[1]), list(layer_tensors.values()).index(gg.split(".", 2)[2]))
        return (0 if gg == "token_embd.weight" else 2 if gg == "output_norm.weight" else 3, 0, 0)

    for hf_name, gg_name in sorted(names.items(), key=order):
        w.add_tensor(gg_name, np.ascontiguousarray(weights[hf_name], dtype=np.float32), raw_dtype=T.F32)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return arch, cfg, weights, names


# --------------------------------------------------------------------------------------------
# Read back and check
# --------------------------------------------------------------------------------------------
def field(r, key):
    return r.fields[key].contents()


def tensors_of(r) -> dict:
    """name -> float32 array in HF's [out, in] layout (outermost first)."""
    out = {}
    for t in r.tensors:
        assert t.tensor_type == T.F32, (t.name, t.tensor_type.name)
        out[t.name] = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
    return out


def check_readback(out: Path, arch: str, cfg: dict, weights: dict, names: dict):
    r = gguf.GGUFReader(str(out))
    expect = {
        "general.architecture": arch,
        f"{arch}.context_length": cfg["max_position_embeddings"],
        f"{arch}.embedding_length": cfg["hidden_size"],
        f"{arch}.block_count": cfg["num_hidden_layers"],
        f"{arch}.feed_forward_length": cfg["intermediate_size"],
        f"{arch}.attention.head_count": cfg["num_attention_heads"],
        f"{arch}.attention.head_count_kv": cfg["num_key_value_heads"],
        f"{arch}.rope.freq_base": rope_theta(cfg),
        f"{arch}.attention.layer_norm_rms_epsilon": cfg["rms_norm_eps"],
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": TOKENIZER_PRE[arch],
    }
    if cfg.get("head_dim") is not None and arch != "phi3":
        expect[f"{arch}.attention.key_length"] = cfg["head_dim"]
        expect[f"{arch}.attention.value_length"] = cfg["head_dim"]
    scaling_keys = [k for k in r.fields if k.startswith(f"{arch}.rope.scaling.")]
    yarn = rope_scaling(cfg)
    if arch == "phi3":
        expect[f"{arch}.rope.scaling.original_context_length"] = cfg["original_max_position_embeddings"]
        expect[f"{arch}.rope.dimension_count"] = phi3_rope_dims(cfg)
        expect[f"{arch}.attention.sliding_window"] = cfg.get("sliding_window") or 0
        assert scaling_keys == [f"{arch}.rope.scaling.original_context_length"], scaling_keys
        assert f"{arch}.attention.key_length" not in r.fields
    elif yarn is None:
        assert not scaling_keys, scaling_keys
    else:
        expect[f"{arch}.rope.scaling.type"] = "yarn"
        expect[f"{arch}.rope.scaling.factor"] = yarn["factor"]
        expect[f"{arch}.rope.scaling.original_context_length"] = yarn["original_max_position_embeddings"]
        for k in ("beta_fast", "beta_slow"):
            if k in yarn:
                expect[f"{arch}.rope.scaling.yarn_{k}"] = yarn[k]
        assert sorted(scaling_keys) == sorted(k for k in expect if ".rope.scaling." in k), scaling_keys
    for k, v in expect.items():
        got = field(r, k)
        ok = np.isclose(got, v, rtol=1e-6) if isinstance(v, float) else got == v
        assert ok, (k, got, v)
    assert len(field(r, "tokenizer.ggml.tokens")) == cfg["vocab_size"]
    t = tensors_of(r)
    assert set(t) == set(names.values()), sorted(set(t) ^ set(names.values()))
    for hf_name, gg_name in names.items():
        assert t[gg_name].shape == weights[hf_name].shape, (gg_name, t[gg_name].shape)
        assert np.array_equal(t[gg_name], weights[hf_name]), gg_name  # exact, q/k not permuted
    print(f"read back: {len(t)} F32 tensors, {len(r.fields)} fields; keys, shapes and values match "
          f"(output.weight {'present' if 'output.weight' in t else 'absent: tied embeddings'})")
    return r


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_inv_freq(r, arch, theta, hd):
    """(inv_freq [hd/2], cos/sin multiplier) from the GGUF's keys: plain RoPE without
    <arch>.rope.scaling.type, else YaRN as transformers' _compute_yarn_parameters (truncate=True,
    no attention_factor / mscale), with beta_fast / beta_slow from the GGUF or 32 / 1."""
    pos_freqs = theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    key = f"{arch}.rope.scaling."
    kind = field(r, key + "type") if key + "type" in r.fields else "none"
    if kind == "none":
        return 1.0 / pos_freqs, 1.0
    assert kind == "yarn", kind
    factor = float(field(r, key + "factor"))
    orig_ctx = int(field(r, key + "original_context_length"))
    beta_fast = float(field(r, key + "yarn_beta_fast")) if key + "yarn_beta_fast" in r.fields else 32.0
    beta_slow = float(field(r, key + "yarn_beta_slow")) if key + "yarn_beta_slow" in r.fields else 1.0

    def correction_dim(n_rot):  # the dimension whose wavelength makes n_rot turns in orig_ctx
        return hd * math.log(orig_ctx / (n_rot * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), hd - 1)
    if low == high:
        high += 0.001  # as transformers, against a division by zero
    ramp = np.clip((np.arange(hd // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrap_factor = 1.0 - ramp  # 1: keep the frequency (fast dims), 0: divide it by factor
    inv_freq = (1.0 / (factor * pos_freqs)) * (1.0 - extrap_factor) + (1.0 / pos_freqs) * extrap_factor
    attn_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv_freq, attn_factor


def forward(r, ids):
    """Logits [len(ids), vocab] of one sequence from the GGUF's tensors and keys alone (float64)."""
    t = {k: v.astype(np.float64) for k, v in tensors_of(r).items()}
    arch = field(r, "general.architecture")
    assert arch in ARCHS, arch
    n_layer = int(field(r, f"{arch}.block_count"))
    n_head = int(field(r, f"{arch}.attention.head_count"))
    n_kv = int(field(r, f"{arch}.attention.head_count_kv"))
    eps = float(field(r, f"{arch}.attention.layer_norm_rms_epsilon"))
    theta = float(field(r, f"{arch}.rope.freq_base"))
    n_embd = int(field(r, f"{arch}.embedding_length"))
    hd = (int(field(r, f"{arch}.attention.key_length"))
          if f"{arch}.attention.key_length" in r.fields else n_embd // n_head)
    # rotated dims per head (phi3: rope.dimension_count, the first n_rot of each head; the rest
    # pass through, as transformers' Phi3 apply_rotary_pos_emb)
    n_rot = (int(field(r, f"{arch}.rope.dimension_count"))
             if f"{arch}.rope.dimension_count" in r.fields else hd)
    n = len(ids)

    inv_freq, attn_factor = rope_inv_freq(r, arch, theta, n_rot)          # [n_rot/2]
    ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]       # [n, n_rot/2]
    cos, sin = np.cos(ang)[:, None, :] * attn_factor, np.sin(ang)[:, None, :] * attn_factor

    def rope(x):  # x [n, heads, hd]; NeoX / rotate_half: pairs (i, i + n_rot/2) for i < n_rot/2
        a, b, rest = x[..., :n_rot // 2], x[..., n_rot // 2:n_rot], x[..., n_rot:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin, rest], axis=-1)

    causal = np.triu(np.full((n, n), -np.inf), k=1)
    window = (int(field(r, f"{arch}.attention.sliding_window"))
              if f"{arch}.attention.sliding_window" in r.fields else 0)
    if window > 0:  # phi3: query i sees keys j with i - window < j <= i (llama.cpp / transformers)
        causal = causal + np.tril(np.full((n, n), -np.inf), k=-window)
    x = t["token_embd.weight"][ids]
    for i in range(n_layer):
        p = f"blk.{i}."
        h = rms_norm(x, t[p + "attn_norm.weight"], eps)
        if arch == "phi3":  # fused qkv, split as Phi3Attention: q, then k, then v rows
            qkv = h @ t[p + "attn_qkv.weight"].T
            nq, nk = n_head * hd, n_kv * hd
            assert qkv.shape[-1] == nq + 2 * nk, qkv.shape
            q = qkv[:, :nq].reshape(n, n_head, hd)
            k = qkv[:, nq:nq + nk].reshape(n, n_kv, hd)
            v = qkv[:, nq + nk:].reshape(n, n_kv, hd)
        else:
            q = (h @ t[p + "attn_q.weight"].T).reshape(n, n_head, hd)
            k = (h @ t[p + "attn_k.weight"].T).reshape(n, n_kv, hd)
            v = (h @ t[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
        if arch == "qwen2":  # q/k/v biases (phi3 has none, and no q/k norm)
            q = q + t[p + "attn_q.bias"].reshape(n_head, hd)
            k = k + t[p + "attn_k.bias"].reshape(n_kv, hd)
            v = v + t[p + "attn_v.bias"].reshape(n_kv, hd)
        elif arch == "qwen3":  # RMSNorm over each head's head_dim slice, after the projection, before RoPE
            q = rms_norm(q, t[p + "attn_q_norm.weight"], eps)
            k = rms_norm(k, t[p + "attn_k_norm.weight"], eps)
        q, k = rope(q), rope(k)
        att = np.empty((n, n_head, hd))
        for hh in range(n_head):
            kv = hh // (n_head // n_kv)
            s = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(hd) + causal
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            att[:, hh, :] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
        x = x + att.reshape(n, n_head * hd) @ t[p + "attn_output.weight"].T
        h = rms_norm(x, t[p + "ffn_norm.weight"], eps)
        if arch == "phi3":  # fused gate_up: gate, up = chunk(2) -- gate the first half of the rows
            gu = h @ t[p + "ffn_up.weight"].T
            n_ff = int(field(r, f"{arch}.feed_forward_length"))
            assert gu.shape[-1] == 2 * n_ff, gu.shape
            g, u = gu[:, :n_ff], gu[:, n_ff:]
        else:
            g, u = h @ t[p + "ffn_gate.weight"].T, h @ t[p + "ffn_up.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ t[p + "ffn_down.weight"].T
    x = rms_norm(x, t["output_norm.weight"], eps)
    return x @ t.get("output.weight", t["token_embd.weight"]).T


def check_tokenizer(r, expected, pre=None):
    """The GGUF vocabulary + merges with llama.cpp's split regex for tokenizer.ggml.pre (or for
    `pre` when given) encode every prompt of EXPECTED_JSON to its input_ids (BOS prepended when
    add_bos_token is set)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    pre = pre or field(r, "tokenizer.ggml.pre")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field(r, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRE_SPLIT[pre]), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([tokens[i] for i, ty in enumerate(types) if ty == TOKEN_CONTROL])
    bos = [int(field(r, "tokenizer.ggml.bos_token_id"))] if field(r, "tokenizer.ggml.add_bos_token") else []
    for prompt, ids in zip(expected["prompts"], expected["input_ids"]):
        got = bos + tok.encode(prompt, add_special_tokens=False).ids
        assert got == ids, (prompt, got, ids)
    print(f"tokenizer: the GGUF vocabulary with pre {pre!r} gives expected.json's input_ids for all "
          f"{len(expected['prompts'])} prompts (add_bos_token={bool(bos)})")


def check_logits(r, expected_path: Path):
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    check_tokenizer(r, expected)
    worst = 0.0
    for i, (ids, logits) in enumerate(zip(expected["input_ids"], expected["logits"])):
        ref = np.asarray(logits, dtype=np.float64)
        got = forward(r, ids)
        assert got.shape == ref.shape, (got.shape, ref.shape)
        err = np.abs(got - ref)
        rel = err.max() / np.abs(ref).max()
        big = np.abs(ref) >= 1.0
        print(f"numpy forward from the GGUF vs transformers, prompt {i} ({len(ids)} tokens): "
              f"max |diff| {err.max():.3g}, max |diff| / max |logit| {rel:.3g}, "
              f"max rel where |logit| >= 1 {(err[big] / np.abs(ref[big])).max():.3g}, "
              f"argmax agree {np.array_equal(got.argmax(-1), ref.argmax(-1))}")
        worst = max(worst, rel)
    # transformers computes in float32 (its RMSNorm and RoPE tables in float32 even for a
    # float64 model) and expected.json keeps 7 significant digits: ~1e-6 is agreement.
    assert worst < 1e-4, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--check", type=Path, metavar="EXPECTED_JSON",
                    help="compare a numpy forward pass from the written GGUF with these logits")
    args = ap.parse_args()
    arch, cfg, weights, names = convert(args.hf_dir, args.out)
    print(f"wrote {args.out}: {args.out.stat().st_size} bytes, architecture {arch}")
    r = check_readback(args.out, arch, cfg, weights, names)
    if args.check:
        check_logits(r, args.check)


if __name__ == "__main__":
    main()
