#!/usr/bin/env python3
"""OpenVINO's side of bench/peer/internvl_peer.py: one step per process, run with the OpenVINO
venv's python (bench/peer/ov_venv.sh), each printing one JSON object on stdout.

  export-vision  --ckpt HF_CKPT --out DIR [--calib IMG,...]
      The InternViT tower + pixel shuffle + MLP projector of an InternVL checkpoint in
      transformers' native layout (`edgevl synth --hf-names`), built with transformers'
      InternVLModel (its get_image_features: last layer, CLS dropped, pixel shuffle at the
      config's downsample_ratio, multi_modal_projector) as one module, converted with
      openvino.convert_model (dynamic batch of 448x448 tiles) and saved three ways:
        vision-f32.xml     f32 weights (compress_to_fp16=False)
        vision-int8w.xml   nncf.compress_weights (int8 weight-only, NNCF's default INT8_ASYM)
        vision-int8.xml    nncf.quantize (static int8: weights and activations), calibrated on
                           the --calib images (InternVL's 448x448 resize + ImageNet mean/std)
  export-llm     --ckpt CKPT --out DIR --weight-format int8|int4
      The Qwen2 LLM of an InternVL checkpoint (original layout: llm_config, language_model.*)
      written as a plain Qwen2ForCausalLM checkpoint, then exported by optimum-intel
      (`optimum-cli export openvino --task text-generation-with-past --weight-format ...`,
      which also writes the tokenizer / detokenizer IR that LLMPipeline needs).
  bench-vision   --xml X --threads 2 --batch 1 --reps N
      CPU plugin, INFERENCE_NUM_THREADS and PERFORMANCE_HINT=LATENCY; one untimed inference,
      then N timed ones of `--batch` tiles (wall clock of infer()). Reports the plugin's
      INFERENCE_PRECISION_HINT and the primitive types its execution graph ran (e.g.
      brgemm_avx512_amx, jit_avx2), which say which ISA oneDNN took.
  bench-llm      --dir D --threads 2 --pp 512 --tg 64 --reps N [--ttft-tokens T]
      openvino_genai.LLMPipeline on CPU with the same two properties; random token ids
      (TokenizedInputs, no tokenizer in the loop), min_new_tokens = max_new_tokens = tg.
      From GenAI's perf metrics: pp tok/s = pp / TTFT, decode tok/s = 1000 / TPOT (the mean
      time per generated token after the first). --ttft-tokens T also times T prompt tokens
      and one generated token (TTFT), the text side of a 1-tile image prompt.

ONEDNN_MAX_CPU_ISA in the environment (e.g. AVX2) is left to the plugin; the primitive types
reported show whether it took effect.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time

MEAN = (0.485, 0.456, 0.406)  # InternVL's preprocessing: ImageNet mean / std, 448x448 tiles
STD = (0.229, 0.224, 0.225)


def cpu_config(a):
    c = {"INFERENCE_NUM_THREADS": a.threads, "PERFORMANCE_HINT": "LATENCY"}
    if a.precision:  # f32 where bf16 is not an instruction of the level (ONEDNN_MAX_CPU_ISA=AVX2)
        c["INFERENCE_PRECISION_HINT"] = a.precision
    return c


def tile(path):
    import numpy as np
    from PIL import Image
    im = Image.open(path).convert("RGB").resize((448, 448), Image.BICUBIC)
    x = (np.asarray(im, dtype=np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def export_vision(a):
    import nncf
    import numpy as np
    import openvino as ov
    import torch
    from transformers import InternVLModel

    model = InternVLModel.from_pretrained(a.ckpt, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()

    class Tower(torch.nn.Module):  # tower + pixel shuffle + projector, one graph
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, pixel_values):
            return self.m.get_image_features(pixel_values=pixel_values, vision_feature_layer=-1,
                                             vision_feature_select_strategy="default").pooler_output

    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    with torch.no_grad():
        ovm = ov.convert_model(Tower(model), example_input=torch.randn(1, 3, 448, 448),
                               input=[([-1, 3, 448, 448], ov.Type.f32)])
    out = {"convert_s": time.time() - t0, "files": {}}
    ov.save_model(ovm, os.path.join(a.out, "vision-f32.xml"), compress_to_fp16=False)
    out["files"]["f32"] = os.path.join(a.out, "vision-f32.xml")
    core = ov.Core()
    t0 = time.time()
    w8 = nncf.compress_weights(core.read_model(out["files"]["f32"]))
    ov.save_model(w8, os.path.join(a.out, "vision-int8w.xml"), compress_to_fp16=False)
    out["files"]["int8w"] = os.path.join(a.out, "vision-int8w.xml")
    out["int8w_s"] = time.time() - t0
    calib = [tile(p) for p in a.calib.split(",") if p]
    if not calib:  # no real images given: a few random tiles
        rng = np.random.default_rng(0)
        calib = [rng.standard_normal((1, 3, 448, 448), dtype=np.float32) for _ in range(4)]
    t0 = time.time()
    q8 = nncf.quantize(core.read_model(out["files"]["f32"]), nncf.Dataset(calib),
                       subset_size=len(calib), model_type=nncf.ModelType.TRANSFORMER)
    ov.save_model(q8, os.path.join(a.out, "vision-int8.xml"), compress_to_fp16=False)
    out["files"]["int8"] = os.path.join(a.out, "vision-int8.xml")
    out["int8_s"] = time.time() - t0
    out["calib_images"] = len(calib)
    out["versions"] = versions()
    print(json.dumps(out))


def export_llm(a):
    import torch
    from safetensors.torch import load_file, save_file

    qdir = a.out + "-qwen2"
    if not os.path.exists(os.path.join(qdir, "model.safetensors")):
        os.makedirs(qdir, exist_ok=True)
        with open(os.path.join(a.ckpt, "config.json")) as f:
            cfg = json.load(f)
        llm = dict(cfg["llm_config"], architectures=["Qwen2ForCausalLM"], model_type="qwen2")
        llm.pop("_attn_implementation", None)
        with open(os.path.join(qdir, "config.json"), "w") as f:
            json.dump(llm, f, indent=1)
        sd = {}
        for fn in sorted(os.listdir(a.ckpt)):
            if fn.endswith(".safetensors"):
                for k, v in load_file(os.path.join(a.ckpt, fn)).items():
                    if k.startswith("language_model."):
                        sd[k[len("language_model."):]] = v.to(torch.bfloat16).contiguous()
        save_file(sd, os.path.join(qdir, "model.safetensors"), metadata={"format": "pt"})
        for fn in ("vocab.json", "merges.txt", "tokenizer_config.json", "generation_config.json"):
            if os.path.exists(os.path.join(a.ckpt, fn)):
                shutil.copy(os.path.join(a.ckpt, fn), qdir)
    cli = os.path.join(os.path.dirname(sys.executable), "optimum-cli")
    t0 = time.time()
    subprocess.run([cli, "export", "openvino", "--model", qdir, "--task",
                    "text-generation-with-past", "--weight-format", a.weight_format, a.out],
                   check=True, stdout=sys.stderr)
    print(json.dumps({"dir": a.out, "export_s": time.time() - t0, "versions": versions()}))


def exec_primitives(compiled):
    """Counts of the execution graph's layer:primitive types after a run (which kernels and ISA
    ran; FullyConnected shows gemm_mlas_* when OpenVINO's MLAS GEMM took it)."""
    c = collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        if "primitiveType" in rt:
            c[f'{rt["layerType"].astype(str)}:{rt["primitiveType"].astype(str)}'] += 1
    return dict(c.most_common())


def bench_vision(a):
    import numpy as np
    import openvino as ov
    core = ov.Core()
    t0 = time.time()
    compiled = core.compile_model(a.xml, "CPU", cpu_config(a))
    compile_s = time.time() - t0
    req = compiled.create_infer_request()
    x = np.random.default_rng(1).standard_normal((a.batch, 3, 448, 448), dtype=np.float32)
    req.infer([x])
    samples = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        req.infer([x])
        samples.append((time.perf_counter() - t0) * 1e3)
    out_shape = list(req.get_output_tensor(0).shape)
    print(json.dumps({"ms": samples, "batch": a.batch, "output_shape": out_shape,
                      "compile_s": compile_s,
                      "inference_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
                      "threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
                      "primitives": exec_primitives(compiled),
                      "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
                      "versions": versions()}))


def bench_llm(a):
    import numpy as np
    import openvino as ov
    import openvino_genai as g
    pipe = g.LLMPipeline(a.dir, "CPU", **cpu_config(a))
    rng = np.random.default_rng(1)

    def gen(n_prompt, n_new):
        ids = rng.integers(1000, 100000, (1, n_prompt), dtype=np.int64)
        inp = g.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        cfg = g.GenerationConfig()
        cfg.max_new_tokens = n_new
        cfg.min_new_tokens = n_new
        cfg.ignore_eos = True
        cfg.do_sample = False
        r = pipe.generate(inp, cfg)
        pm = r.perf_metrics
        return {"ttft_ms": pm.get_ttft().mean, "tpot_ms": pm.get_tpot().mean,
                "new_tokens": pm.get_num_generated_tokens(),
                "prompt_tokens": pm.get_num_input_tokens()}

    gen(a.pp, 4)  # warm-up (compiles the shapes)
    out = {"pp": [], "tg": [], "runs": []}
    for _ in range(a.reps):
        r = gen(a.pp, a.tg)
        out["runs"].append(r)
        out["pp"].append(a.pp / r["ttft_ms"] * 1e3)
        out["tg"].append(1e3 / r["tpot_ms"])
    if a.ttft_tokens:
        out["ttft_text_ms"] = [gen(a.ttft_tokens, 1)["ttft_ms"] for _ in range(a.reps)]
        out["ttft_tokens"] = a.ttft_tokens
    out["onednn_max_cpu_isa"] = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    out["versions"] = versions()
    print(json.dumps(out))


def versions():
    v = {}
    for m in ("openvino", "openvino_genai", "nncf", "transformers", "optimum.intel", "torch"):
        try:
            mod = __import__(m, fromlist=["_"])
            v[m] = getattr(mod, "__version__", "?")
        except Exception:
            pass
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("export-vision")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--calib", default="")
    p = sub.add_parser("export-llm")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--weight-format", required=True)
    p = sub.add_parser("bench-vision")
    p.add_argument("--xml", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--reps", type=int, default=2)
    p = sub.add_parser("bench-llm")
    p.add_argument("--dir", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pp", type=int, default=512)
    p.add_argument("--tg", type=int, default=64)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--ttft-tokens", type=int, default=0)
    for p in sub.choices["bench-vision"], sub.choices["bench-llm"]:
        p.add_argument("--precision", default="", help="INFERENCE_PRECISION_HINT (default: the "
                       "plugin's: bf16 where the CPU has AVX-512 BF16 / AMX)")
    a = ap.parse_args()
    {"export-vision": export_vision, "export-llm": export_llm, "bench-vision": bench_vision,
     "bench-llm": bench_llm}[a.cmd](a)


if __name__ == "__main__":
    main()
