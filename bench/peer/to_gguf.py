#!/usr/bin/env python3
"""Write a hub checkpoint (as made by `edgevl synth`) as a GGUF file llama.cpp can load.

Same weights, llama.cpp's tensor names and metadata:
  qwen2     -> arch "qwen2" (q/k/v biases, NEOX rope: no permutation needed)
  qwen3     -> arch "qwen3" (per-head q/k norms as attn_q_norm / attn_k_norm, explicit head_dim
               as key_length / value_length, NEOX rope)
  internlm2 -> arch "llama": wqkv split like edgevl's compiler (rows grouped per KV head as
               [q heads of the group..., k, v]) and q/k permuted from rotate-half to llama.cpp's
               interleaved rope layout, as convert_hf_to_gguf.py does for llama checkpoints
  llama     -> arch "llama" (q/k permuted)

Types: f16 (2-D weights F16, norms/biases F32), q8_0 / q4_0 ("pure": every 2-D weight,
embedding included, in that type; norms/biases F32) quantized with gguf.quants. The tokenizer
is a minimal SentencePiece-style list (<unk>, <s>, </s>, 256 byte tokens, then placeholders)
of the checkpoint's vocab size: benchmarks feed token ids, so only the count matters.

Prints one JSON line: {"path", "type", "bytes", "decode_bytes", "params"}.
decode_bytes = bytes a decode step reads (every tensor once; the embedding is read whole only
when it doubles as the output matrix, otherwise one row).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf

DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4)}


def read_safetensors(path):
    """name -> float32 ndarray (bf16 widened by a 16-bit shift)."""
    out = {}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    base = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, size = DTYPES[info["dtype"]]
        a, b = info["data_offsets"]
        raw = np.frombuffer(mm[base + a:base + b], dtype=dt).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = raw.astype(np.float32)
        out[name] = arr
    return out


def load_checkpoint(d):
    tensors = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(d, fn)))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    return cfg, tensors


def permute_rope(w, n_head):
    """HF rotate-half row order -> llama.cpp interleaved pairs (convert_hf_to_gguf.permute)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def mapped_tensors(cfg, t):
    """Yields (gguf_name, float32 array) in llama.cpp naming."""
    mt = cfg.get("model_type", "")
    nl = cfg["num_hidden_layers"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    d = cfg["hidden_size"]
    hd = d // nh
    tied = cfg.get("tie_word_embeddings", False)
    if mt == "internlm2":
        yield "token_embd.weight", t["model.tok_embeddings.weight"]
        g = nh // nkv
        for i in range(nl):
            p = f"model.layers.{i}."
            qkv = t[p + "attention.wqkv.weight"].reshape(nkv, g + 2, hd, d)
            q = qkv[:, :g].reshape(nh * hd, d)
            k = qkv[:, g].reshape(nkv * hd, d)
            v = qkv[:, g + 1].reshape(nkv * hd, d)
            yield f"blk.{i}.attn_norm.weight", t[p + "attention_norm.weight"]
            yield f"blk.{i}.attn_q.weight", permute_rope(q, nh)
            yield f"blk.{i}.attn_k.weight", permute_rope(k, nkv)
            yield f"blk.{i}.attn_v.weight", v
            yield f"blk.{i}.attn_output.weight", t[p + "attention.wo.weight"]
            yield f"blk.{i}.ffn_norm.weight", t[p + "ffn_norm.weight"]
            yield f"blk.{i}.ffn_gate.weight", t[p + "feed_forward.w1.weight"]
            yield f"blk.{i}.ffn_up.weight", t[p + "feed_forward.w3.weight"]
            yield f"blk.{i}.ffn_down.weight", t[p + "feed_forward.w2.weight"]
        yield "output_norm.weight", t["model.norm.weight"]
        if not tied:
            yield "output.weight", t["output.weight"]
        return
    llama = mt not in ("qwen2", "qwen3")
    yield "token_embd.weight", t["model.embed_tokens.weight"]
    for i in range(nl):
        p = f"model.layers.{i}."
        q, k = t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"]
        if llama:
            q, k = permute_rope(q, nh), permute_rope(k, nkv)
        yield f"blk.{i}.attn_norm.weight", t[p + "input_layernorm.weight"]
        yield f"blk.{i}.attn_q.weight", q
        yield f"blk.{i}.attn_k.weight", k
        yield f"blk.{i}.attn_v.weight", t[p + "self_attn.v_proj.weight"]
        for nm, gn in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v")):
            b = t.get(p + f"self_attn.{nm}_proj.bias")
            if b is not None:
                if llama and nm in "qk":
                    b = permute_rope(b, nh if nm == "q" else nkv)
                yield f"blk.{i}.{gn}.bias", b
        if mt == "qwen3":
            yield f"blk.{i}.attn_q_norm.weight", t[p + "self_attn.q_norm.weight"]
            yield f"blk.{i}.attn_k_norm.weight", t[p + "self_attn.k_norm.weight"]
        yield f"blk.{i}.attn_output.weight", t[p + "self_attn.o_proj.weight"]
        yield f"blk.{i}.ffn_norm.weight", t[p + "post_attention_layernorm.weight"]
        yield f"blk.{i}.ffn_gate.weight", t[p + "mlp.gate_proj.weight"]
        yield f"blk.{i}.ffn_up.weight", t[p + "mlp.up_proj.weight"]
        yield f"blk.{i}.ffn_down.weight", t[p + "mlp.down_proj.weight"]
    yield "output_norm.weight", t["model.norm.weight"]
    if not tied:
        yield "output.weight", t["lm_head.weight"]


QTYPES = {
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
}


def convert(ckpt, out, qtype):
    cfg, t = load_checkpoint(ckpt)
    mt = cfg.get("model_type", "")
    arch = mt if mt in ("qwen2", "qwen3") else "llama"
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    vocab = cfg["vocab_size"]
    ggml_type, ftype = QTYPES[qtype]
    w = gguf.GGUFWriter(out, arch)
    w.add_name(f"edgevl-synth-{mt}")
    w.add_context_length(min(int(cfg.get("max_position_embeddings", 4096)), 32768))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    if "head_dim" in cfg:  # Qwen3: 128 whatever hidden / heads is
        w.add_key_length(int(cfg["head_dim"]))
        w.add_value_length(int(cfg["head_dim"]))
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_file_type(ftype)
    # Minimal SentencePiece-style vocabulary of the right size.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"tok{i}" for i in range(len(tokens), vocab)]
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
             + [gguf.TokenType.BYTE] * 256
             + [gguf.TokenType.NORMAL] * (vocab - 259))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    tied = bool(cfg.get("tie_word_embeddings", False))
    decode_bytes = 0
    params = 0
    for name, arr in mapped_tensors(cfg, t):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        params += arr.size
        if arr.ndim == 2 and ggml_type != gguf.GGMLQuantizationType.F16:
            data = gguf.quants.quantize(arr, ggml_type)
            w.add_tensor(name, data, raw_dtype=ggml_type)
        elif arr.ndim == 2:
            data = arr.astype(np.float16)
            w.add_tensor(name, data)
        else:
            data = arr
            w.add_tensor(name, data)
        if name == "token_embd.weight" and not tied:
            decode_bytes += data.nbytes // arr.shape[0]
        else:
            decode_bytes += data.nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"path": out, "type": qtype, "bytes": os.path.getsize(out),
            "decode_bytes": decode_bytes, "params": params}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--type", choices=sorted(QTYPES), default="f16")
    a = ap.parse_args()
    print(json.dumps(convert(a.checkpoint, a.out, a.type)))


if __name__ == "__main__":
    sys.exit(main())
