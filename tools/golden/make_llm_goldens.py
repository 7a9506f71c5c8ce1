#!/usr/bin/env python3
"""Golden outputs for the edgevl LLM path, from the public reference (transformers/PyTorch).

Writes tiny random-weight checkpoints of the REAL architectures, in the hub layout, into
tests/fixtures/golden/<name>/ together with golden.json and logits_<i>.npy:

  qwen2               Qwen2ForCausalLM, byte-level BPE tokenizer (tokenizer.json AND vocab.json+merges.txt)
  llama               LlamaForCausalLM, sentencepiece BPE tokenizer with byte fallback (tokenizer.model)
  internlm2           InternLM2ForCausalLM layout (fused grouped wqkv), goldens computed with an
                      equivalent LlamaForCausalLM (InternLM2 is remote code, not in transformers)
  internlm2_as_llama  the very same weights in Llama layout (same goldens)
  qwen3               Qwen3ForCausalLM (per-head q/k RMSNorm, explicit head_dim != hidden/heads),
                      the qwen2 byte-level BPE tokenizer, config in transformers 5's own form
                      (rope_parameters, dtype) as save_pretrained writes it
  llama_bias          LlamaForCausalLM with attention_bias and mlp_bias (every projection biased)
  internlm2_bias      InternLM2 with `bias: true` (wqkv.bias packed like wqkv, wo.bias), goldens from the
                      equivalent LlamaForCausalLM with attention_bias

Usage (from the repo root):
  bash tools/golden/setup_venv.sh && build/venv/bin/python tools/golden/make_llm_goldens.py [NAME ...]
(no NAME: all of them; names as above, internlm2 making both internlm2 directories)

Deterministic: fixed seeds, single thread, tokenizers trained from an in-repo corpus
(tools/golden/corpus.txt) through iterators (no file paths embedded in the models).
"""

import copy
import json
import math
import os
import re
import shutil
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import sentencepiece as spm  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,  # noqa: E402
                        normalizers, pre_tokenizers, processors, trainers)
from transformers import (AutoTokenizer, LlamaConfig, LlamaForCausalLM,  # noqa: E402
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)
from transformers.tokenization_python import PreTrainedTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "golden")
CORPUS = os.path.join(HERE, "corpus.txt")

N_GREEDY = 32
N_SEED_SEARCH = 64  # seeds tried per model; the one with the most robust greedy run wins
MIN_DISTINCT = 6   # a greedy run repeating one token tests little

VERSIONS = {
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "tokenizers": tokenizers.__version__,
    "sentencepiece": spm.__version__,
    "numpy": np.__version__,
}

QWEN2_PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                           r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

QWEN2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

INTERNLM2_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

INTERNLM2_SPECIALS = ["<|plugin|>", "<|interpreter|>", "<|action_end|>", "<|action_start|>",
                      "<|im_end|>", "<|im_start|>"]

COMMON_TOKENIZER_TEXTS = [
    "Hello, world!",
    " Hello world",
    "   multiple   spaces\tand\ttabs  ",
    "line one\nline two\n\n\nline five\r\n",
    "1234567890 3.14159 -42 1,000,000",
    "Café naïve résumé über",
    "中文你好，世界！",
    "emoji 🙂🚀 and symbols → ∑ ≠",
    "don't I'm we'll they've you'd It's",
    "ALL CAPS and MiXeD CaSe",
    "a",
    "",
    "<|im_start not special",
]


# ----------------------------------------------------------------------------- helpers

_NUM_LIST = re.compile(r"\[\s*(-?[0-9.eE+-]+(?:,\s*-?[0-9.eE+-]+)*)\s*\]")


def write_json(path, obj):
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    # keep lists of numbers (token ids) on one line
    text = _NUM_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    assert json.loads(text) == obj
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def fresh_dir(name):
    d = os.path.join(OUT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def corpus_lines():
    with open(CORPUS, encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


# ----------------------------------------------------------------------------- tokenizers

def build_qwen2_tokenizer(d, bpe_vocab=500):
    """Byte-level BPE like Qwen2: NFC, Qwen2 split regex, GPT-2 byte mapping, 3 added specials."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=bpe_vocab, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    assert tok.get_vocab_size() == bpe_vocab, tok.get_vocab_size()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False, lstrip=False, rstrip=False,
                                       single_word=False) for s in specials])

    # Serialize in the form Qwen2's hub tokenizer.json uses (merges as "a b" strings,
    # ByteLevel decoder without prefix space).
    j = json.loads(tok.to_str())
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    m = j["model"]
    m["continuing_subword_prefix"] = ""
    m["end_of_word_suffix"] = ""
    merges = [" ".join(p) if isinstance(p, list) else p for p in m["merges"]]
    m["merges"] = merges
    write_json(os.path.join(d, "tokenizer.json"), j)

    vocab = m["vocab"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(vocab, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for mg in merges:
            f.write(mg + "\n")

    added = {}
    for s in specials:
        added[str(tok.token_to_id(s))] = {"content": s, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False, "special": True}
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": QWEN2_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    })
    return {s: tok.token_to_id(s) for s in specials}, tok.get_vocab_size()


def train_sentencepiece(path, vocab_size, add_dummy_prefix, user_defined_symbols=()):
    with open(path, "wb") as f:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter([ln.rstrip("\n") for ln in corpus_lines() if ln.strip()]),
            model_writer=f,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=0.9995,
            byte_fallback=True,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            remove_extra_whitespaces=False,
            normalization_rule_name="identity",
            add_dummy_prefix=add_dummy_prefix,
            user_defined_symbols=list(user_defined_symbols),
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            num_threads=1,
            minloglevel=2,
        )
    sp = spm.SentencePieceProcessor(model_file=path)
    assert sp.get_piece_size() == vocab_size
    return sp


def build_llama_tokenizer(d, vocab_size=512):
    sp = train_sentencepiece(os.path.join(d, "tokenizer.model"), vocab_size, add_dummy_prefix=True)
    tokdef = lambda s: {"content": s, "lstrip": False, "normalized": False, "rstrip": False,  # noqa: E731
                        "single_word": False, "special": True}
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {"0": tokdef("<unk>"), "1": tokdef("<s>"), "2": tokdef("</s>")},
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": False,
        "model_max_length": 512,
        "pad_token": None,
        "padding_side": "right",
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
    })
    return sp


def build_internlm2_tokenizer(d, vocab_size=512):
    # InternLM2's tokenizer.model has no dummy prefix; its chat specials are pieces of the model.
    sp = train_sentencepiece(os.path.join(d, "tokenizer.model"), vocab_size, add_dummy_prefix=False,
                             user_defined_symbols=INTERNLM2_SPECIALS)
    tokdef = lambda s: {"content": s, "lstrip": False, "normalized": False, "rstrip": False,  # noqa: E731
                        "single_word": False, "special": True}
    added = {"0": tokdef("<unk>"), "1": tokdef("<s>"), "2": tokdef("</s>")}
    for s in INTERNLM2_SPECIALS:
        added[str(sp.piece_to_id(s))] = tokdef(s)
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|action_start|>", "<|action_end|>",
                                      "<|interpreter|>", "<|plugin|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_internlm2.InternLM2Tokenizer",
                                       "tokenization_internlm2_fast.InternLM2TokenizerFast"]},
        "bos_token": "<s>",
        "chat_template": INTERNLM2_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "decode_with_prefix_space": False,
        "eos_token": "</s>",
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "</s>",
        "sp_model_kwargs": None,
        "tokenizer_class": "InternLM2Tokenizer",
        "unk_token": "<unk>",
    })
    return sp


class InternLM2TokenizerRef(PreTrainedTokenizer):
    """Re-statement of the reference tokenization_internlm2.InternLM2Tokenizer (remote code, a
    slow python tokenizer): added/special tokens are split out by the base class, every other
    segment is `sp_model.encode(text, out_type=str)`, and BOS is prepended."""

    vocab_files_names = {"vocab_file": "tokenizer.model"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>",
                 add_bos_token=True, add_eos_token=False, clean_up_tokenization_spaces=False, **kwargs):
        kwargs.pop("sp_model_kwargs", None)
        kwargs.pop("auto_map", None)
        kwargs.pop("decode_with_prefix_space", None)
        self.vocab_file = vocab_file
        self.add_bos_token = add_bos_token
        self.add_eos_token = add_eos_token
        self.sp_model = spm.SentencePieceProcessor(model_file=vocab_file)
        super().__init__(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, pad_token=pad_token,
                         clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)

    @property
    def vocab_size(self):
        return self.sp_model.get_piece_size()

    def get_vocab(self):
        v = {self.sp_model.id_to_piece(i): i for i in range(self.vocab_size)}
        v.update(self.added_tokens_encoder)
        return v

    def _tokenize(self, text, **kwargs):
        return self.sp_model.encode(text, out_type=str)

    def _convert_token_to_id(self, token):
        return self.sp_model.piece_to_id(token)

    def _convert_id_to_token(self, index):
        return self.sp_model.id_to_piece(index)

    def convert_tokens_to_string(self, tokens):
        out, cur = "", []
        for t in tokens:
            if t in self.all_special_tokens:
                out += self.sp_model.decode(cur) + t
                cur = []
            else:
                cur.append(t)
        return out + self.sp_model.decode(cur)

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        out = ([self.sp_model.bos_id()] if self.add_bos_token else []) + token_ids_0
        if token_ids_1 is not None:
            out = out + token_ids_1
        if self.add_eos_token:
            out = out + [self.sp_model.eos_id()]
        return out


def simple_spm_encode(sp, text, specials, bos):
    """Independent cross-check: split on special strings, sp.encode each other segment."""
    ids = [sp.bos_id()] if bos else []
    if specials:
        pat = "(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
        parts = re.split(pat, text)
    else:
        parts = [text]
    for p in parts:
        if not p:
            continue
        if p in specials:
            ids.append(specials[p])
        else:
            ids.extend(sp.encode(p))
    return ids


def tokenizer_vectors(tok, texts):
    out = []
    for t in texts:
        ids = tok(t)["input_ids"]
        out.append({"text": t, "ids": list(map(int, ids)),
                    "decoded": tok.decode(ids, skip_special_tokens=False)})
    return out


# ----------------------------------------------------------------------------- weights & goldens

def init_weights(model, seed, emb_std, w_gain, lm_gain, bias_std, norm_jitter):
    """Explicit, version-independent init (HF's _init_weights may change across releases)."""
    g = torch.Generator().manual_seed(seed)
    hidden = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + norm_jitter * r)
            elif name.endswith(".bias"):
                p.copy_(bias_std * r)
            elif "embed_tokens" in name:
                p.copy_(emb_std * r)
            elif "lm_head" in name:
                p.copy_(lm_gain / math.sqrt(hidden) * r)
            else:
                p.copy_(w_gain / math.sqrt(p.shape[1]) * r)


@torch.no_grad()
def prefill_logits(model, ids):
    return model(torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0].float().numpy()


@torch.no_grad()
def greedy(model, prompt_ids, n):
    """Manual argmax loop, full recompute each step, no early stop at EOS."""
    ids = list(prompt_ids)
    toks, margins, ratios = [], [], []
    for _ in range(n):
        lg = model(torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0, -1].double()
        top2 = torch.topk(lg, 2).values
        margin = float(top2[0] - top2[1])
        rng = float(lg.max() - lg.min())
        nxt = int(torch.argmax(lg))
        toks.append(nxt)
        margins.append(margin)
        ratios.append(margin / rng)
        ids.append(nxt)
    return toks, margins, ratios


def rounded_copy(model, dtype):
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(dtype).float())
    return m


def pick_seed(make_model, prompt_ids, base_seed, init_kw, vocab_limit=None):
    """Deterministic search over N_SEED_SEARCH seeds. A seed qualifies when its greedy run is
    not degenerate (>= MIN_DISTINCT distinct tokens) and stays token-identical when the weights
    are rounded to bf16 and to f16; among those, the largest worst-step (top1-top2)/range wins."""
    best = None
    for s in range(base_seed, base_seed + N_SEED_SEARCH):
        model = make_model()
        init_weights(model, s, **init_kw)
        toks, margins, ratios = greedy(model, prompt_ids, N_GREEDY)
        ok = len(set(toks)) >= MIN_DISTINCT
        if vocab_limit is not None:  # padding rows of the embedding are not tokens
            ok = ok and max(toks) < vocab_limit
        if ok:
            for dt in (torch.bfloat16, torch.float16):
                if greedy(rounded_copy(model, dt), prompt_ids, N_GREEDY)[0] != toks:
                    ok = False
                    break
        score = (ok, min(ratios))
        if best is None or score > best[0]:
            best = (score, s)
    assert best[0][0], "no seed gave a stable, non-degenerate greedy run"
    return best[1]


def write_goldens(d, arch, model, tok_name, prompts, greedy_prompt_index, tok_vectors, extra=None):
    entries = []
    for i, (text, ids) in enumerate(prompts):
        lg = prefill_logits(model, ids).astype("<f4")
        np.save(os.path.join(d, f"logits_{i}.npy"), np.ascontiguousarray(lg))
        entries.append({"text": text, "ids": ids, "logits": f"logits_{i}.npy"})
    gp = prompts[greedy_prompt_index][1]
    toks, margins, ratios = greedy(model, gp, N_GREEDY)
    # recorded fact (not a selection criterion): does the whole model computing in bf16 / f16
    # (weights and activations, torch CPU kernels) still produce the same greedy tokens?
    full_lowp = [str(dt).replace("torch.", "") for dt in (torch.bfloat16, torch.float16)
                 if greedy(copy.deepcopy(model).to(dt), gp, N_GREEDY)[0] == toks]
    g = {
        "arch": arch,
        "tokenizer_reference": tok_name,
        "prompts": entries,
        "greedy": {
            "prompt_ids": gp,
            "tokens": toks,
            "min_margin": round(min(margins), 6),
            "min_margin_over_logit_range": round(min(ratios), 6),
            "same_tokens_with_weights_rounded_to": ["bfloat16", "float16"],
            "same_tokens_with_whole_model_computing_in": full_lowp,
        },
        "tokenizer_vectors": tok_vectors,
        "versions": VERSIONS,
    }
    if extra:
        g.update(extra)
    write_json(os.path.join(d, "golden.json"), g)
    return g


def save_safetensors(d, tensors):
    save_file({k: v.detach().contiguous().float() for k, v in tensors.items()},
              os.path.join(d, "model.safetensors"), metadata={"format": "pt"})


def llama_like_config_json(cfg, vocab, bos, eos, tie):
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "hidden_act": "silu",
        "hidden_size": cfg["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": cfg["inter"],
        "max_position_embeddings": cfg["max_pos"],
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": cfg["heads"],
        "num_hidden_layers": cfg["layers"],
        "num_key_value_heads": cfg["kv_heads"],
        "pretraining_tp": 1,
        "rms_norm_eps": cfg["eps"],
        "rope_scaling": None,
        "rope_theta": cfg["theta"],
        "tie_word_embeddings": tie,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab,
    }


def make_llama_model(cfg, vocab, bos, eos):
    conf = LlamaConfig(vocab_size=vocab, hidden_size=cfg["hidden"], intermediate_size=cfg["inter"],
                       num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
                       num_key_value_heads=cfg["kv_heads"], max_position_embeddings=cfg["max_pos"],
                       rms_norm_eps=cfg["eps"], rope_theta=cfg["theta"], tie_word_embeddings=False,
                       attention_bias=False, mlp_bias=False, bos_token_id=bos, eos_token_id=eos,
                       attn_implementation="eager")
    m = LlamaForCausalLM(conf).float().eval()
    assert m.config._attn_implementation == "eager"
    return m


# ----------------------------------------------------------------------------- qwen2

QWEN2_CFG = dict(hidden=64, inter=128, layers=2, heads=4, kv_heads=2, eps=1e-6, theta=1000000.0, max_pos=512)
INIT_KW = dict(emb_std=1.0, w_gain=1.6, lm_gain=8.0, bias_std=0.5, norm_jitter=0.1)


def make_qwen2():
    d = fresh_dir("qwen2")
    specials, n_tok = build_qwen2_tokenizer(d)
    vocab = ((n_tok + 63) // 64) * 64  # padded embedding like the real Qwen2 (151936 > 151646)
    tok = AutoTokenizer.from_pretrained(d)
    # the vocab.json+merges.txt form must tokenize identically to tokenizer.json
    alt = os.path.join(d, "_alt")
    os.makedirs(alt)
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(d, f), alt)
    tok_alt = AutoTokenizer.from_pretrained(alt)

    c = QWEN2_CFG

    def mk():
        conf = Qwen2Config(vocab_size=vocab, hidden_size=c["hidden"], intermediate_size=c["inter"],
                           num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                           num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_pos"],
                           rms_norm_eps=c["eps"], rope_theta=c["theta"], tie_word_embeddings=True,
                           use_sliding_window=False, bos_token_id=specials["<|endoftext|>"],
                           eos_token_id=specials["<|im_end|>"], attn_implementation="eager")
        m = Qwen2ForCausalLM(conf).float().eval()
        assert m.config._attn_implementation == "eager"
        assert m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()
        return m

    chat = tok.apply_chat_template([{"role": "system", "content": "You are a helpful assistant."},
                                    {"role": "user", "content": "Capital of France?"}],
                                   tokenize=False, add_generation_prompt=True)
    texts = ["The quick brown fox jumps over the lazy dog.",
             chat,
             "Numbers like 3.14159 and 2024 cost $19.99, café 🙂!"]
    prompts = []
    for t in texts:
        ids = list(map(int, tok(t)["input_ids"]))
        assert ids == list(map(int, tok_alt(t)["input_ids"])), t
        assert 5 <= len(ids) <= 40, (t, len(ids))
        prompts.append((t, ids))
    vec_texts = COMMON_TOKENIZER_TEXTS + ["<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"]
    vecs = tokenizer_vectors(tok, vec_texts)
    for v in vecs:
        assert v["ids"] == list(map(int, tok_alt(v["text"])["input_ids"])), v["text"]
    shutil.rmtree(alt)

    seed = pick_seed(mk, prompts[1][1], 1000, INIT_KW)
    model = mk()
    init_weights(model, seed, **INIT_KW)
    sd = model.state_dict()
    save_safetensors(d, {k: v for k, v in sd.items() if k != "lm_head.weight"})  # tied: no lm_head
    write_json(os.path.join(d, "config.json"), {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|im_end|>"],
        "hidden_act": "silu",
        "hidden_size": c["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": c["inter"],
        "max_position_embeddings": c["max_pos"],
        "max_window_layers": c["layers"],
        "model_type": "qwen2",
        "num_attention_heads": c["heads"],
        "num_hidden_layers": c["layers"],
        "num_key_value_heads": c["kv_heads"],
        "rms_norm_eps": c["eps"],
        "rope_theta": c["theta"],
        "sliding_window": c["max_pos"],
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab,
    })
    write_json(os.path.join(d, "generation_config.json"), {
        "bos_token_id": specials["<|endoftext|>"],
        "do_sample": False,
        "eos_token_id": [specials["<|im_end|>"], specials["<|endoftext|>"]],
        "pad_token_id": specials["<|endoftext|>"],
    })
    g = write_goldens(d, "qwen2", model, "transformers AutoTokenizer (Qwen2Tokenizer) on tokenizer.json; "
                      "identical ids from vocab.json+merges.txt", prompts, 1, vecs,
                      extra={"seed": seed, "init": INIT_KW, "tokenizer_size": n_tok, "model_vocab_size": vocab})
    return g


# ----------------------------------------------------------------------------- llama

LLAMA_CFG = dict(hidden=64, inter=176, layers=2, heads=4, kv_heads=2, eps=1e-5, theta=10000.0, max_pos=512)


def make_llama():
    d = fresh_dir("llama")
    sp = build_llama_tokenizer(d)
    vocab = sp.get_piece_size()
    tok = AutoTokenizer.from_pretrained(d)
    c = LLAMA_CFG
    mk = lambda: make_llama_model(c, vocab, 1, 2)  # noqa: E731
    texts = ["Once upon a time there was a little house",
             "[INST] What is the capital of Japan? [/INST]",
             "def add(a, b):\n    return a + b\n"]
    prompts = []
    for t in texts:
        ids = list(map(int, tok(t)["input_ids"]))
        assert ids[0] == 1
        assert 5 <= len(ids) <= 40, (t, len(ids))
        prompts.append((t, ids))
    vecs = tokenizer_vectors(tok, COMMON_TOKENIZER_TEXTS + ["<s>hello</s> world"])
    # Where transformers' converted LlamaTokenizer (Metaspace, prepend_scheme "first") and plain
    # sentencepiece (dummy prefix always added) disagree -- leading spaces -- keep both answers.
    mism = []
    for v in vecs:
        sp_ids = simple_spm_encode(sp, v["text"], {"<s>": 1, "</s>": 2}, True)
        if sp_ids != v["ids"]:
            v["ids_sentencepiece"] = sp_ids
            mism.append(v["text"])
    seed = pick_seed(mk, prompts[0][1], 2000, INIT_KW)
    model = mk()
    init_weights(model, seed, **INIT_KW)
    save_safetensors(d, model.state_dict())
    write_json(os.path.join(d, "config.json"), llama_like_config_json(c, vocab, 1, 2, False))
    write_json(os.path.join(d, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    return write_goldens(d, "llama", model, "transformers AutoTokenizer (LlamaTokenizer converted from "
                         "tokenizer.model, legacy=false)", prompts, 0, vecs,
                         extra={"seed": seed, "init": INIT_KW, "tokenizer_size": vocab, "model_vocab_size": vocab,
                                "texts_where_plain_sentencepiece_differs": mism})


# ----------------------------------------------------------------------------- internlm2

INTERNLM2_CFG = dict(hidden=96, inter=160, layers=2, heads=6, kv_heads=2, eps=1e-5, theta=1000000.0, max_pos=512)


def llama_to_internlm2(sd, c):
    """Llama state dict -> InternLM2 tensor names, with q/k/v packed into the grouped wqkv:
    rows = [n_kv_heads][q_per_kv + 2][head_dim] (per kv head: its q heads, its k, its v), which
    is what modeling_internlm2 undoes with rearrange('b q (h gs d) -> b q h gs d', gs=2+groups)."""
    hd = c["hidden"] // c["heads"]
    nkv = c["kv_heads"]
    grp = c["heads"] // nkv
    out = {"model.tok_embeddings.weight": sd["model.embed_tokens.weight"],
           "model.norm.weight": sd["model.norm.weight"],
           "output.weight": sd["lm_head.weight"]}
    for i in range(c["layers"]):
        p, q = f"model.layers.{i}.", f"model.layers.{i}."
        wq = sd[p + "self_attn.q_proj.weight"].reshape(nkv, grp, hd, -1)
        wk = sd[p + "self_attn.k_proj.weight"].reshape(nkv, 1, hd, -1)
        wv = sd[p + "self_attn.v_proj.weight"].reshape(nkv, 1, hd, -1)
        out[q + "attention.wqkv.weight"] = torch.cat([wq, wk, wv], dim=1).reshape((c["heads"] + 2 * nkv) * hd, -1)
        if p + "self_attn.q_proj.bias" in sd:  # InternLM2 with bias: wqkv.bias packed the same way
            bq = sd[p + "self_attn.q_proj.bias"].reshape(nkv, grp, hd)
            bk = sd[p + "self_attn.k_proj.bias"].reshape(nkv, 1, hd)
            bv = sd[p + "self_attn.v_proj.bias"].reshape(nkv, 1, hd)
            out[q + "attention.wqkv.bias"] = torch.cat([bq, bk, bv], dim=1).reshape(-1)
            out[q + "attention.wo.bias"] = sd[p + "self_attn.o_proj.bias"]
        out[q + "attention.wo.weight"] = sd[p + "self_attn.o_proj.weight"]
        out[q + "feed_forward.w1.weight"] = sd[p + "mlp.gate_proj.weight"]
        out[q + "feed_forward.w3.weight"] = sd[p + "mlp.up_proj.weight"]
        out[q + "feed_forward.w2.weight"] = sd[p + "mlp.down_proj.weight"]
        out[q + "attention_norm.weight"] = sd[p + "input_layernorm.weight"]
        out[q + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
    return out


def make_internlm2():
    d = fresh_dir("internlm2")
    da = fresh_dir("internlm2_as_llama")
    sp = build_internlm2_tokenizer(d)
    vocab = sp.get_piece_size()
    tok = InternLM2TokenizerRef.from_pretrained(d)
    specials = {s: sp.piece_to_id(s) for s in INTERNLM2_SPECIALS}
    specials.update({"<s>": 1, "</s>": 2, "<unk>": 0})
    c = INTERNLM2_CFG
    mk = lambda: make_llama_model(c, vocab, 1, 2)  # noqa: E731
    chat = tok.apply_chat_template([{"role": "user", "content": "Describe the image in detail."}],
                                   tokenize=False, add_generation_prompt=True)
    assert chat.startswith("<s><|im_start|>user\n"), chat
    texts = [chat[len("<s>"):],  # BOS comes from the tokenizer, not from the text
             "Water boils at 100 degrees Celsius.",
             "中文也会出现在文本中。Hello 🚀"]
    prompts = []
    for t in texts:
        ids = list(map(int, tok(t)["input_ids"]))
        assert ids == simple_spm_encode(sp, t, specials, True), t
        assert 5 <= len(ids) <= 40, (t, len(ids))
        prompts.append((t, ids))
    vecs = tokenizer_vectors(tok, COMMON_TOKENIZER_TEXTS + ["<|im_start|>user\nhi<|im_end|>\n</s>"])
    for v in vecs:
        assert v["ids"] == simple_spm_encode(sp, v["text"], specials, True), v["text"]

    seed = pick_seed(mk, prompts[0][1], 3000, INIT_KW)
    model = mk()
    init_weights(model, seed, **INIT_KW)
    sd = model.state_dict()

    save_safetensors(da, sd)
    write_json(os.path.join(da, "config.json"), llama_like_config_json(c, vocab, 1, 2, False))
    save_safetensors(d, llama_to_internlm2(sd, c))
    write_json(os.path.join(d, "config.json"), {
        "architectures": ["InternLM2ForCausalLM"],
        "attn_implementation": "eager",
        "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                     "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
                     "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"},
        "bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": c["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": c["inter"],
        "max_position_embeddings": c["max_pos"],
        "model_type": "internlm2",
        "num_attention_heads": c["heads"],
        "num_hidden_layers": c["layers"],
        "num_key_value_heads": c["kv_heads"],
        "pad_token_id": 2,
        "rms_norm_eps": c["eps"],
        "rope_scaling": None,
        "rope_theta": c["theta"],
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab,
    })
    gen = {"bos_token_id": 1, "eos_token_id": [2, specials["<|im_end|>"]], "pad_token_id": 2, "do_sample": False}
    for dd in (d, da):
        write_json(os.path.join(dd, "generation_config.json"), gen)
    shutil.copy(os.path.join(d, "tokenizer.model"), da)
    shutil.copy(os.path.join(d, "tokenizer_config.json"), da)
    extra = {"seed": seed, "init": INIT_KW, "tokenizer_size": vocab, "model_vocab_size": vocab,
             "note": "goldens computed with transformers LlamaForCausalLM holding the same weights; "
                     "internlm2/ stores them in InternLM2 layout (fused grouped wqkv), "
                     "internlm2_as_llama/ in Llama layout: both must give these logits"}
    tok_ref = ("InternLM2Tokenizer semantics (tokenization_internlm2.py, remote code) re-stated on "
               "transformers PythonBackend: split added tokens, sentencepiece-encode the rest, prepend BOS")
    g = write_goldens(d, "internlm2", model, tok_ref, prompts, 0, vecs, extra=extra)
    write_goldens(da, "llama", model, tok_ref, prompts, 0, vecs, extra=extra)
    return g


# ----------------------------------------------------------------------------- qwen3

QWEN3_CFG = dict(hidden=64, inter=128, layers=2, heads=4, kv_heads=2, head_dim=32, eps=1e-6,
                 theta=1000000.0, max_pos=512)
# q/k come out of the per-head norms at unit scale, which leaves attention nearly flat and the
# greedy run repetitive; norm weights far from 1 (trained Qwen3 q_norm / k_norm weights are)
# give sharper attention and a more varied run.
QWEN3_INIT_KW = dict(INIT_KW, norm_jitter=0.8, w_gain=2.4)


def make_qwen3():
    d = fresh_dir("qwen3")
    specials, n_tok = build_qwen2_tokenizer(d)
    vocab = ((n_tok + 63) // 64) * 64
    tok = AutoTokenizer.from_pretrained(d)
    c = QWEN3_CFG

    def mk():
        conf = Qwen3Config(vocab_size=vocab, hidden_size=c["hidden"], intermediate_size=c["inter"],
                           num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                           num_key_value_heads=c["kv_heads"], head_dim=c["head_dim"],
                           max_position_embeddings=c["max_pos"], rms_norm_eps=c["eps"],
                           rope_parameters={"rope_type": "default", "rope_theta": c["theta"]},
                           tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
                           bos_token_id=specials["<|endoftext|>"], eos_token_id=specials["<|im_end|>"],
                           attn_implementation="eager")
        m = Qwen3ForCausalLM(conf).float().eval()
        assert m.config._attn_implementation == "eager"
        assert m.model.layers[0].self_attn.q_norm.weight.shape == (c["head_dim"],)
        return m

    chat = tok.apply_chat_template([{"role": "user", "content": "Capital of France?"}],
                                   tokenize=False, add_generation_prompt=True)
    texts = ["The quick brown fox jumps over the lazy dog.",
             chat,
             "Numbers like 3.14159 and 2024 cost $19.99, café 🙂!"]
    prompts = []
    for t in texts:
        ids = list(map(int, tok(t)["input_ids"]))
        assert 5 <= len(ids) <= 40, (t, len(ids))
        prompts.append((t, ids))
    vecs = tokenizer_vectors(tok, COMMON_TOKENIZER_TEXTS[:4])
    seed = pick_seed(mk, prompts[1][1], 3000, QWEN3_INIT_KW, vocab_limit=n_tok)
    model = mk()
    init_weights(model, seed, **QWEN3_INIT_KW)
    # transformers 5's own config.json for this model (rope_parameters, dtype), checked to hold
    # what the model was built with.
    model.config.dtype = torch.float32
    model.config.save_pretrained(d)
    with open(os.path.join(d, "config.json")) as f:
        saved = json.load(f)
    assert saved["model_type"] == "qwen3" and saved["head_dim"] == c["head_dim"], saved
    assert "rope_parameters" in saved and "rope_theta" not in saved, saved
    os.remove(os.path.join(d, "generation_config.json")) if os.path.exists(
        os.path.join(d, "generation_config.json")) else None
    sd = model.state_dict()
    save_safetensors(d, {k: v for k, v in sd.items() if k != "lm_head.weight"})  # tied
    write_json(os.path.join(d, "generation_config.json"), {
        "bos_token_id": specials["<|endoftext|>"],
        "do_sample": False,
        "eos_token_id": [specials["<|im_end|>"], specials["<|endoftext|>"]],
    })
    return write_goldens(d, "qwen3", model, "transformers AutoTokenizer (Qwen2Tokenizer) on tokenizer.json",
                         prompts, 1, vecs,
                         extra={"seed": seed, "init": QWEN3_INIT_KW, "tokenizer_size": n_tok, "model_vocab_size": vocab})


# ----------------------------------------------------------------------------- llama with biases

def make_llama_bias():
    d = fresh_dir("llama_bias")
    sp = build_llama_tokenizer(d)
    vocab = sp.get_piece_size()
    tok = AutoTokenizer.from_pretrained(d)
    c = LLAMA_CFG

    def mk():
        conf = LlamaConfig(vocab_size=vocab, hidden_size=c["hidden"], intermediate_size=c["inter"],
                           num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                           num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_pos"],
                           rms_norm_eps=c["eps"], rope_theta=c["theta"], tie_word_embeddings=False,
                           attention_bias=True, mlp_bias=True, bos_token_id=1, eos_token_id=2,
                           attn_implementation="eager")
        m = LlamaForCausalLM(conf).float().eval()
        assert m.model.layers[0].mlp.down_proj.bias is not None
        return m

    texts = ["Once upon a time there was a little house",
             "def add(a, b):\n    return a + b\n"]
    prompts = [(t, list(map(int, tok(t)["input_ids"]))) for t in texts]
    seed = pick_seed(mk, prompts[0][1], 4000, INIT_KW)
    model = mk()
    init_weights(model, seed, **INIT_KW)
    save_safetensors(d, model.state_dict())
    cfg = llama_like_config_json(c, vocab, 1, 2, False)
    cfg["attention_bias"] = True
    cfg["mlp_bias"] = True
    write_json(os.path.join(d, "config.json"), cfg)
    write_json(os.path.join(d, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    return write_goldens(d, "llama", model, "transformers AutoTokenizer (LlamaTokenizer)", prompts, 0, [],
                         extra={"seed": seed, "init": INIT_KW, "tokenizer_size": vocab, "model_vocab_size": vocab})


def make_internlm2_bias():
    d = fresh_dir("internlm2_bias")
    sp = build_internlm2_tokenizer(d)
    vocab = sp.get_piece_size()
    tok = InternLM2TokenizerRef.from_pretrained(d)
    c = INTERNLM2_CFG

    def mk():
        conf = LlamaConfig(vocab_size=vocab, hidden_size=c["hidden"], intermediate_size=c["inter"],
                           num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                           num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_pos"],
                           rms_norm_eps=c["eps"], rope_theta=c["theta"], tie_word_embeddings=False,
                           attention_bias=True, mlp_bias=False, bos_token_id=1, eos_token_id=2,
                           attn_implementation="eager")
        return LlamaForCausalLM(conf).float().eval()

    texts = ["Water boils at 100 degrees Celsius.", "中文也会出现在文本中。Hello 🚀"]
    prompts = [(t, list(map(int, tok(t)["input_ids"]))) for t in texts]
    seed = pick_seed(mk, prompts[0][1], 5000, INIT_KW)
    model = mk()
    init_weights(model, seed, **INIT_KW)
    save_safetensors(d, llama_to_internlm2(model.state_dict(), c))
    with open(os.path.join(OUT, "internlm2", "config.json")) as f:
        cfg = json.load(f)
    cfg["bias"] = True
    write_json(os.path.join(d, "config.json"), cfg)
    write_json(os.path.join(d, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    return write_goldens(d, "internlm2", model, "InternLM2Tokenizer semantics (make_llm_goldens)", prompts, 0, [],
                         extra={"seed": seed, "init": INIT_KW, "tokenizer_size": vocab, "model_vocab_size": vocab})


MAKERS = {"qwen2": make_qwen2, "llama": make_llama, "internlm2": make_internlm2, "qwen3": make_qwen3,
          "llama_bias": make_llama_bias, "internlm2_bias": make_internlm2_bias}


def main():
    os.makedirs(OUT, exist_ok=True)
    names = sys.argv[1:] or list(MAKERS)
    for n in names:
        assert n in MAKERS, f"unknown golden '{n}' (known: {', '.join(MAKERS)})"
    for fn in (MAKERS[n] for n in names):
        g = fn()
        gr = g["greedy"]
        print(f"{g['arch']:10s} seed={g['seed']} prompts={[len(p['ids']) for p in g['prompts']]} "
              f"min_margin={gr['min_margin']:.4f} ratio={gr['min_margin_over_logit_range']:.4f} "
              f"distinct={len(set(gr['tokens']))} greedy={gr['tokens']}")
        if g.get("texts_where_plain_sentencepiece_differs"):
            print("   HF ids differ from plain sentencepiece on:", g["texts_where_plain_sentencepiece_differs"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
