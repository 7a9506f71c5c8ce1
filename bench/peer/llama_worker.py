#!/usr/bin/env python3
"""One llama.cpp benchmark run in its own process (so load time and peak RSS are its own).

Uses llama-cpp-python's low-level API only (llama_decode with hand-filled batches):
  ppN      decode N random token ids as one batch into an empty KV cache (logits of the last)
  tgN@dD   decode D tokens (untimed, n_batch at a time), then N single-token steps, each
           fed the greedy argmax of the previous logits
Each test: one warm-up, then --reps timed runs; prints one JSON line with every sample.
"""
import argparse
import json
import random
import resource
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--pp", type=int, nargs="*", default=[512])
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--depth", type=int, nargs="*", default=[0, 512])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    t_import = time.perf_counter()
    import llama_cpp as L
    L.llama_backend_init()
    import_ms = (time.perf_counter() - t_import) * 1e3

    # What the Python interpreter, numpy and the bindings hold before any model.
    rss_before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    mp = L.llama_model_default_params()
    mp.use_mmap = True
    t0 = time.perf_counter()
    load = getattr(L, "llama_model_load_from_file", None) or L.llama_load_model_from_file
    model = load(a.gguf.encode(), mp)
    if not model:
        raise SystemExit(f"llama.cpp could not load {a.gguf}")
    load_ms = (time.perf_counter() - t0) * 1e3

    n_batch = 512
    cp = L.llama_context_default_params()
    cp.n_ctx = a.ctx
    cp.n_batch = n_batch
    cp.n_ubatch = n_batch
    cp.n_threads = a.threads
    cp.n_threads_batch = a.threads
    t0 = time.perf_counter()
    init = getattr(L, "llama_init_from_model", None) or L.llama_new_context_with_model
    ctx = init(model, cp)
    if not ctx:
        raise SystemExit("llama.cpp could not create a context")
    ctx_ms = (time.perf_counter() - t0) * 1e3

    if hasattr(L, "llama_model_get_vocab"):
        n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    else:
        n_vocab = L.llama_n_vocab(model)

    def clear():
        if hasattr(L, "llama_get_memory"):
            L.llama_memory_clear(L.llama_get_memory(ctx), True)
        elif hasattr(L, "llama_kv_self_clear"):
            L.llama_kv_self_clear(ctx)
        else:
            L.llama_kv_cache_clear(ctx)

    batch = L.llama_batch_init(n_batch, 0, 1)

    def decode(ids, pos0, want_logits=True):
        """Decodes ids at positions pos0.. in chunks of n_batch; returns the last logits."""
        for s in range(0, len(ids), n_batch):
            chunk = ids[s:s + n_batch]
            batch.n_tokens = len(chunk)
            for i, tok in enumerate(chunk):
                batch.token[i] = tok
                batch.pos[i] = pos0 + s + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 0
            batch.logits[len(chunk) - 1] = 1
            rc = L.llama_decode(ctx, batch)
            if rc != 0:
                raise SystemExit(f"llama_decode returned {rc}")
        if hasattr(L, "llama_synchronize"):
            L.llama_synchronize(ctx)
        if not want_logits:
            return None
        return np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))

    rng = random.Random(a.seed)

    def rand_ids(n):
        return [rng.randrange(3, n_vocab) for _ in range(n)]

    tests = []
    for n in a.pp:
        ids = rand_ids(n)
        samples = []
        for r in range(a.reps + 1):
            clear()
            t0 = time.perf_counter()
            decode(ids, 0)
            dt = time.perf_counter() - t0
            if r > 0:
                samples.append(n / dt)
        tests.append({"name": f"pp{n}", "samples": samples})
    for d in a.depth:
        if d + a.tg > a.ctx:
            raise SystemExit(f"tg{a.tg}@d{d} does not fit the context of {a.ctx}")
        prefix = rand_ids(d)
        first = rand_ids(1)[0]
        samples = []
        for r in range(a.reps + 1):
            clear()
            if d:
                decode(prefix, 0, want_logits=False)
            tok = first
            t0 = time.perf_counter()
            for i in range(a.tg):
                logits = decode([tok], d + i)
                tok = int(np.argmax(logits))
            dt = time.perf_counter() - t0
            if r > 0:
                samples.append(a.tg / dt)
        tests.append({"name": f"tg{a.tg}@d{d}", "samples": samples})

    info = L.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else str(info)
    L.llama_batch_free(batch)
    print(json.dumps({
        "engine": "llama.cpp",
        "llama_cpp_python": L.__version__,
        "system_info": info.strip(),
        "load_ms": load_ms,
        "ctx_init_ms": ctx_ms,
        "import_ms": import_ms,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "rss_before_load_mb": rss_before_mb,
        "threads": a.threads,
        "tests": tests,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
