#!/usr/bin/env python3
"""Checks for the InternVL goldens written by make_internvl_goldens.py.

1. -hf twins: InternVLForConditionalGeneration.from_pretrained(<dir>_hf) loads with no missing /
   unexpected keys and reproduces vision_embeds, logits_last and the greedy ids of golden.json.
2. Naming: the ORIGINAL-naming checkpoint, converted with the rules of transformers'
   convert_internvl_weights_to_hf.py (its regex tables, qkv split [:dim]/[dim:2dim]/[-dim:], wqkv
   rearrange), equals the -hf checkpoint tensor for tensor, bit for bit.
3. Original semantics: an independent float64 numpy re-implementation of the remote-code vision path
   (modeling_intern_vit.py InternVisionEmbeddings/InternAttention._naive_attn/InternVisionEncoderLayer,
   modeling_internvl_chat.py extract_feature + pixel_shuffle(ps_version v2) + mlp1), reading the
   ORIGINAL-naming safetensors, must give vision_embeds; then the original LLM (Qwen2ForCausalLM from
   language_model.*, or InternLM2 unpacked from the fused wqkv as modeling_internlm2 does) fed with
   embeddings spliced like InternVLChatModel.generate() must give logits_last and the greedy ids.
   Controls: ps_version v1 (no final permute) and reading qkv per head interleaved must NOT match.
4. Prompts re-rendered from the template constants equal golden.json / internvl_templates.json
   (and, with --conversation-py, the reference conversation.py).
5. Size budget: < 2,000,000 bytes per fixture dir.

Usage: build/venv/bin/python tools/golden/check_internvl_goldens.py [--conversation-py PATH]
"""

import argparse
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_internvl_goldens as M  # noqa: E402
import make_llm_goldens as mlg  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.numpy import load_file as load_np  # noqa: E402
from safetensors.torch import load_file as load_pt  # noqa: E402
from transformers import (AutoTokenizer, InternVLForConditionalGeneration, LlamaConfig,  # noqa: E402
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM)

OUT = mlg.OUT
FAIL = []


def check(cond, what):
    print(("  ok   " if cond else "  FAIL ") + what)
    if not cond:
        FAIL.append(what)


# ------------------------------------------------------------------ 2. converter rules
# The tables of transformers/models/internvl/convert_internvl_weights_to_hf.py
CONV_VISION = {r"vision_model": r"vision_tower", r"layers": r"layer", r"class_embedding": r"cls_token",
               r"position_embedding": r"position_embeddings", r"patch_embedding": r"patch_embeddings.projection",
               r"ls(\d+)": r"lambda_\1", r"attn.proj": r"attention.projection_layer",
               r"attn.dropout": r"attention.projection_dropout", r"attn": r"attention",
               r"norm1": r"layernorm_before", r"norm2": r"layernorm_after"}
CONV_TEXT_LLAMA = {r"tok_embeddings": r"embed_tokens", r"attention.wo": r"self_attn.o_proj",
                   r"feed_forward.w1": r"mlp.gate_proj", r"feed_forward.w2": r"mlp.down_proj",
                   r"feed_forward.w3": r"mlp.up_proj", r"attention_norm": r"input_layernorm",
                   r"ffn_norm": r"post_attention_layernorm", r"output": r"lm_head"}
CONV_MULTI = {r"mlp1.0": r"multi_modal_projector.layer_norm", r"mlp1.1": r"multi_modal_projector.linear_1",
              r"mlp1.3": r"multi_modal_projector.linear_2"}


def convert_like_reference(orig, llm_type, vis_dim, lm_dim, n_heads, n_kv, head_dim):
    out = {}
    for key, t in orig.items():
        new = key
        if key.startswith("vision_model"):
            table = CONV_VISION
        elif key.startswith("language_model"):
            table = CONV_TEXT_LLAMA if llm_type == "llama" else {}
        else:
            table = CONV_MULTI
        for pat, rep in table.items():
            new = re.sub(pat, rep, new)
        if "attn.qkv" in key:
            out[new.replace("attention.qkv", "attention.q_proj")] = t[:vis_dim]
            out[new.replace("attention.qkv", "attention.k_proj")] = t[vis_dim:2 * vis_dim]
            out[new.replace("attention.qkv", "attention.v_proj")] = t[-vis_dim:]
        elif "attention.wqkv" in key:
            gs = 2 + n_heads // n_kv  # rearrange "(h gs d) z -> h gs d z"
            v = t.reshape(n_kv, gs, head_dim, lm_dim)
            out[new.replace("attention.wqkv", "self_attn.q_proj")] = v[:, :gs - 2].reshape(-1, lm_dim)
            out[new.replace("attention.wqkv", "self_attn.k_proj")] = v[:, -2].reshape(-1, lm_dim)
            out[new.replace("attention.wqkv", "self_attn.v_proj")] = v[:, -1].reshape(-1, lm_dim)
        else:
            out[new] = t
    # converter output names -> the module tree of transformers 5 (what save_pretrained writes)
    fixed = {}
    for k, t in out.items():
        if k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif k == "language_model.lm_head.weight":
            k = "lm_head.weight"
        else:
            k = "model." + k
        fixed[k] = t
    return fixed


# ------------------------------------------------------------------ 3. original vision path, numpy f64

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):  # nn.GELU() / ACT2FN["gelu"]: exact erf GELU
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def pixel_shuffle(x, scale_factor=0.5, ps_version="v2"):
    """modeling_internvl_chat.InternVLChatModel.pixel_shuffle, with numpy (view == C-order reshape)."""
    n, w, h, c = x.shape
    x = x.reshape(n, w, int(h * scale_factor), int(c / scale_factor))
    x = np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    x = x.reshape(n, int(h * scale_factor), int(w * scale_factor), int(c / (scale_factor * scale_factor)))
    if ps_version != "v1":
        x = np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    return x


def original_extract_feature(W, cfg, pv, ps_version="v2", qkv_interleaved=False):
    vc = cfg["vision_config"]
    D, H, P = vc["hidden_size"], vc["num_attention_heads"], vc["patch_size"]
    eps = vc["layer_norm_eps"]
    assert vc["norm_type"] == "layer_norm" and vc["qkv_bias"] and not vc["qk_normalization"]
    assert vc["hidden_act"] == "gelu" and cfg["select_layer"] == -1
    g = lambda k: W[k].astype(np.float64)  # noqa: E731
    B, C, IH, IW = pv.shape
    gh, gw = IH // P, IW // P
    # InternVisionEmbeddings: Conv2d(k=P, s=P) as a patch matmul, flatten(2).transpose(1, 2): row-major grid
    patches = pv.astype(np.float64).reshape(B, C, gh, P, gw, P).transpose(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C * P * P)
    x = patches @ g("vision_model.embeddings.patch_embedding.weight").reshape(D, -1).T
    x = x + g("vision_model.embeddings.patch_embedding.bias")
    cls = np.broadcast_to(g("vision_model.embeddings.class_embedding"), (B, 1, D))
    x = np.concatenate([cls, x], 1)
    # _get_pos_embed: bicubic F.interpolate to (gh, gw); at the native 32x32 grid this is the identity
    pos = g("vision_model.embeddings.position_embedding")
    grid = pos[:, 1:].reshape(1, vc["image_size"] // P, vc["image_size"] // P, D).transpose(0, 3, 1, 2)
    interp = torch.nn.functional.interpolate(torch.from_numpy(np.ascontiguousarray(grid)).float(), size=(gh, gw),
                                             mode="bicubic", align_corners=False).double().numpy()
    assert np.array_equal(interp.astype(np.float32), grid.astype(np.float32))
    x = x + np.concatenate([pos[:, :1], grid.reshape(1, D, gh * gw).transpose(0, 2, 1)], 1)
    N = x.shape[1]
    for i in range(vc["num_hidden_layers"]):
        p = f"vision_model.encoder.layers.{i}."
        h = layer_norm(x, g(p + "norm1.weight"), g(p + "norm1.bias"), eps)
        qkv = h @ g(p + "attn.qkv.weight").T + g(p + "attn.qkv.bias")
        if qkv_interleaved:  # control: a wrong reading of the fused rows
            qkv = qkv.reshape(B, N, H, 3, D // H).transpose(3, 0, 2, 1, 4)
        else:  # _naive_attn: reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
            qkv = qkv.reshape(B, N, 3, H, D // H).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = softmax((q * (D // H) ** -0.5) @ k.transpose(0, 1, 3, 2))
        o = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
        o = o @ g(p + "attn.proj.weight").T + g(p + "attn.proj.bias")
        x = x + o * g(p + "ls1")
        h = layer_norm(x, g(p + "norm2.weight"), g(p + "norm2.bias"), eps)
        h = gelu(h @ g(p + "mlp.fc1.weight").T + g(p + "mlp.fc1.bias")) @ g(p + "mlp.fc2.weight").T + g(p + "mlp.fc2.bias")
        x = x + h * g(p + "ls2")
    pre = x
    # extract_feature: drop class token, (h, w) grid, pixel shuffle, mlp1
    x = x[:, 1:, :]
    hh = ww = int(x.shape[1] ** 0.5)
    x = pixel_shuffle(x.reshape(B, hh, ww, -1), cfg["downsample_ratio"], ps_version)
    x = x.reshape(B, -1, x.shape[-1])
    x = layer_norm(x, g("mlp1.0.weight"), g("mlp1.0.bias"), 1e-5)  # nn.LayerNorm default eps
    x = gelu(x @ g("mlp1.1.weight").T + g("mlp1.1.bias"))
    x = x @ g("mlp1.3.weight").T + g("mlp1.3.bias")
    return x, pre


# ------------------------------------------------------------------ 3b. original LLM path

def original_llm(d, cfg):
    lc = cfg["llm_config"]
    sd = load_pt(os.path.join(d, "model.safetensors"))
    lm = {k[len("language_model."):]: v for k, v in sd.items() if k.startswith("language_model.")}
    if lc["architectures"][0] == "Qwen2ForCausalLM":
        conf = Qwen2Config(**{k: v for k, v in lc.items() if k not in ("architectures", "torch_dtype")})
        conf._attn_implementation = "eager"
        m = Qwen2ForCausalLM(conf).float().eval()
        missing, unexpected = m.load_state_dict(lm, strict=True), None
    else:  # InternLM2: unpack the fused grouped wqkv as modeling_internlm2.InternLM2Attention does
        nh, nkv, hid = lc["num_attention_heads"], lc["num_key_value_heads"], lc["hidden_size"]
        hd, gs = hid // nh, 2 + nh // nkv
        ll = {"model.embed_tokens.weight": lm["model.tok_embeddings.weight"],
              "model.norm.weight": lm["model.norm.weight"], "lm_head.weight": lm["output.weight"]}
        for i in range(lc["num_hidden_layers"]):
            p = f"model.layers.{i}."
            w = lm[p + "attention.wqkv.weight"].reshape(nkv, gs, hd, hid)  # 'b q (h gs d) -> b q h gs d'
            ll[p + "self_attn.q_proj.weight"] = w[:, :gs - 2].reshape(-1, hid)  # [..., :num_key_value_groups, :]
            ll[p + "self_attn.k_proj.weight"] = w[:, -2].reshape(-1, hid)
            ll[p + "self_attn.v_proj.weight"] = w[:, -1].reshape(-1, hid)
            ll[p + "self_attn.o_proj.weight"] = lm[p + "attention.wo.weight"]
            ll[p + "mlp.gate_proj.weight"] = lm[p + "feed_forward.w1.weight"]
            ll[p + "mlp.up_proj.weight"] = lm[p + "feed_forward.w3.weight"]
            ll[p + "mlp.down_proj.weight"] = lm[p + "feed_forward.w2.weight"]
            ll[p + "input_layernorm.weight"] = lm[p + "attention_norm.weight"]
            ll[p + "post_attention_layernorm.weight"] = lm[p + "ffn_norm.weight"]
        conf = LlamaConfig(vocab_size=lc["vocab_size"], hidden_size=hid, intermediate_size=lc["intermediate_size"],
                           num_hidden_layers=lc["num_hidden_layers"], num_attention_heads=nh,
                           num_key_value_heads=nkv, max_position_embeddings=lc["max_position_embeddings"],
                           rms_norm_eps=lc["rms_norm_eps"], rope_theta=lc["rope_theta"], tie_word_embeddings=False,
                           attention_bias=lc["bias"], mlp_bias=False)
        conf._attn_implementation = "eager"
        m = LlamaForCausalLM(conf).float().eval()
        m.load_state_dict(ll, strict=True)
    return m


@torch.no_grad()
def original_generate_greedy(llm, ids, vit_embeds, img_ctx, n):
    """InternVLChatModel.generate(): input_embeds[selected] = vit_embeds.reshape(-1, C) on the prompt, then
    greedy; here a manual argmax loop with full recompute (same as the goldens)."""
    emb = llm.get_input_embeddings()
    prompt = torch.tensor(ids)
    sel = prompt == img_ctx
    v = torch.from_numpy(vit_embeds.astype(np.float32)).reshape(-1, emb.weight.shape[1])
    cur, toks, first = list(ids), [], None
    for _ in range(n):
        x = emb(torch.tensor(cur)).clone()
        x[: len(ids)][sel] = v
        lg = llm(inputs_embeds=x[None], use_cache=False).logits[0, -1]
        if first is None:
            first = lg.numpy().copy()
        cur.append(int(torch.argmax(lg)))
        toks.append(cur[-1])
    return first, toks


# ------------------------------------------------------------------ main

def check_model(name, llm_type, ref_conv):
    d, dh = os.path.join(OUT, name), os.path.join(OUT, name + "_hf")
    print(f"== {name}")
    g = json.load(open(os.path.join(d, "golden.json"), encoding="utf-8"))
    check(g == json.load(open(os.path.join(dh, "golden.json"), encoding="utf-8")), "golden.json identical in both dirs")
    cfg = json.load(open(os.path.join(d, "config.json")))
    img_ctx = g["special_ids"]["img_context"]

    # 4. prompts and tokenizer
    tok_files = sorted(f for f in os.listdir(d) if f.startswith("tokenizer") or f in ("vocab.json", "merges.txt"))
    check(all(open(os.path.join(d, f), "rb").read() == open(os.path.join(dh, f), "rb").read() for f in tok_files),
          f"tokenizer files identical in both dirs {tok_files}")
    if llm_type == "qwen2":
        # from the -hf dir: the original dir's config.json has an auto_map (remote code), which makes
        # AutoTokenizer ask whether to trust it; trust_remote_code=False works there too
        tok = AutoTokenizer.from_pretrained(dh)
        tok_o = AutoTokenizer.from_pretrained(d, trust_remote_code=False)
        encode = lambda t: list(map(int, tok(t)["input_ids"]))  # noqa: E731
        check(tok_o(g["tiles_case"][0]["prompt"]["text"])["input_ids"] == g["tiles_case"][0]["prompt"]["ids"],
              "AutoTokenizer(original dir, trust_remote_code=False) gives the same ids")
    else:
        tok = mlg.InternLM2TokenizerRef.from_pretrained(d)
        encode = lambda t: list(map(int, tok(t)["input_ids"]))  # noqa: E731
        sp = tok.sp_model
        specials = {tok.convert_ids_to_tokens(i): i for i in tok.added_tokens_decoder}
        check(all(mlg.simple_spm_encode(sp, c["prompt"]["text"], specials, True) == c["prompt"]["ids"]
                  for c in g["tiles_case"]), "independent split + sentencepiece encode gives the same ids")
    for s, key in ((M.IMG_START, "img_start"), (M.IMG_END, "img_end"), (M.IMG_CONTEXT, "img_context")):
        check(tok.convert_tokens_to_ids(s) == g["special_ids"][key], f"{s} id {g['special_ids'][key]}")
    check(cfg["template"] == g["template"] and g["system_message"] == M.TEMPLATES[g["template"]]["system_message"],
          f"template {g['template']} / system message")
    for case in g["tiles_case"]:
        n = case["tiles"]
        q = M.chat_query(g["template"], "<image>\n" + M.QUESTION, num_patches_list=(n,))
        if ref_conv is not None:
            conv = ref_conv.get_conv_template(g["template"])
            conv.append_message(conv.roles[0], "<image>\n" + M.QUESTION)
            conv.append_message(conv.roles[1], None)
            rq = conv.get_prompt().replace("<image>", M.IMG_START + M.IMG_CONTEXT * 256 * n + M.IMG_END, 1)
            check(rq == q, f"tiles={n}: prompt equals reference conversation.py rendering")
        check(case["prompt"]["text"] == q, f"tiles={n}: prompt text re-rendered")
        check(encode(q) == case["prompt"]["ids"], f"tiles={n}: prompt ids ({len(case['prompt']['ids'])})")

    # 1. -hf reload
    model, info = InternVLForConditionalGeneration.from_pretrained(dh, attn_implementation="eager",
                                                                   dtype=torch.float32, output_loading_info=True)
    model.eval()
    check(not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")),
          f"-hf loads cleanly {dict((k, v) for k, v in info.items() if v)}")
    check(model.lm_head.weight.data_ptr() != model.model.language_model.embed_tokens.weight.data_ptr(),
          "-hf lm_head untied")
    hf_sd = load_pt(os.path.join(dh, "model.safetensors"))

    # 2. original -> hf by the converter's rules
    orig = load_pt(os.path.join(d, "model.safetensors"))
    lc = cfg["llm_config"]
    conv = convert_like_reference(orig, "llama" if llm_type == "internlm2" else "qwen2",
                                  cfg["vision_config"]["hidden_size"], lc["hidden_size"], lc["num_attention_heads"],
                                  lc["num_key_value_heads"], lc["hidden_size"] // lc["num_attention_heads"])
    same = set(conv) == set(hf_sd) and all(torch.equal(conv[k], hf_sd[k]) for k in hf_sd)
    check(same, f"original naming --convert_internvl_weights_to_hf rules--> -hf: {len(conv)} tensors bit-identical")
    ls = [orig[k] for k in orig if k.endswith(".ls1") or k.endswith(".ls2")]
    check(all(float(t.min()) >= 0.5 and float(t.max()) <= 1.5 and float(t.std()) > 0.1 for t in ls),
          "ls1/ls2 are non-trivial (~U(0.5,1.5))")

    # 3. original semantics (numpy f64) on original-naming weights
    W = load_np(os.path.join(d, "model.safetensors"))
    llm = original_llm(d, cfg)
    for case in g["tiles_case"]:
        n = case["tiles"]
        pv = M.pixel_tiles(n)
        gold_ve = np.load(os.path.join(d, case["vision_embeds"]))
        ours, pre = original_extract_feature(W, cfg, pv)
        diff = float(np.abs(ours - gold_ve).max())
        check(diff < 1e-4, f"tiles={n}: numpy f64 ORIGINAL vision path vs transformers vision_embeds max|diff|={diff:.2e}")
        v1, _ = original_extract_feature(W, cfg, pv, ps_version="v1")
        check(float(np.abs(v1 - gold_ve).max()) > 1e-2, f"tiles={n}: control ps_version v1 does NOT match "
              f"({float(np.abs(v1 - gold_ve).max()):.2f})")
        if n == 1:
            bad, _ = original_extract_feature(W, cfg, pv, qkv_interleaved=True)
            check(float(np.abs(bad - gold_ve).max()) > 1e-2, "control: per-head interleaved qkv does NOT match")
            if "vision_features_pre_shuffle" in g:
                pg = np.load(os.path.join(d, g["vision_features_pre_shuffle"]["file"]))
                check(float(np.abs(pre - pg).max()) < 1e-4,
                      f"pre-shuffle features max|diff|={float(np.abs(pre - pg).max()):.2e}")
        lg_first, toks = original_generate_greedy(llm, case["prompt"]["ids"], ours, img_ctx, len(case["prompt"]["greedy"]))
        gold_ll = np.load(os.path.join(d, case["prompt"]["logits_last"]))
        dl = float(np.abs(lg_first - gold_ll).max())
        check(dl < 1e-3, f"tiles={n}: ORIGINAL LLM ({lc['architectures'][0]} naming) logits_last max|diff|={dl:.2e}")
        check(toks == case["prompt"]["greedy"], f"tiles={n}: ORIGINAL path greedy ids")

        # 1 (cont.) transformers -hf reproduces
        with torch.no_grad():
            ve = model.model.get_image_features(pixel_values=torch.from_numpy(pv), return_dict=True).pooler_output.numpy()
            lg = model(input_ids=torch.tensor([case["prompt"]["ids"]]), pixel_values=torch.from_numpy(pv),
                       use_cache=False).logits[0, -1].numpy()
        check(float(np.abs(ve - gold_ve).max()) <= 1e-6, f"tiles={n}: -hf reload vision_embeds max|diff|="
              f"{float(np.abs(ve - gold_ve).max()):.1e}")
        check(float(np.abs(lg - gold_ll).max()) <= 1e-5, f"tiles={n}: -hf reload logits_last max|diff|="
              f"{float(np.abs(lg - gold_ll).max()):.1e}")
        check(M.greedy(model, case["prompt"]["ids"], pv)[0] == case["prompt"]["greedy"], f"tiles={n}: -hf greedy ids")

    for dd in (d, dh):
        size = sum(os.path.getsize(os.path.join(dd, f)) for f in os.listdir(dd))
        check(size < 2_000_000, f"{os.path.basename(dd)} size {size} bytes < 2,000,000")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversation-py", default=os.environ.get("INTERNVL_CONVERSATION_PY"))
    args = ap.parse_args()
    ref = M.reference_conversation(args.conversation_py)
    t = json.load(open(os.path.join(OUT, "internvl_templates.json"), encoding="utf-8"))
    print("== templates")
    for name in M.TEMPLATES:
        e = t["templates"][name]
        check(e["single_turn"]["prompt"] == M.render_mpt(name, [(0, "<image>\nDescribe."), (1, None)]),
              f"{name} single turn")
        if ref is not None:
            c = ref.get_conv_template(name)
            c.append_message(c.roles[0], "<image>\nDescribe.")
            c.append_message(c.roles[1], None)
            check(c.get_prompt() == e["single_turn"]["prompt"], f"{name} single turn == reference conversation.py")
    check_model("internvl_qwen2", "qwen2", ref)
    check_model("internvl_internlm2", "internlm2", ref)
    print("FAILED:" if FAIL else "all checks passed", *FAIL, sep="\n  ")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
