#!/usr/bin/env python3
"""This machine's physical bounds, so every throughput can be shown as a fraction of one.

  read bandwidth: bench/peer/stream_read.c (AVX-512 or AVX2 streaming sum of a 1 GiB buffer, OpenMP,
                  best of 8 passes) with 1 and 2 threads -> GB/s        (bound for decode)
  GEMM peak:      numpy float32 matmul 2048^3 on OpenBLAS with 2 threads -> GFLOP/s
                  (bound for prefill and vision; f32 FMA is what f16/bf16-weight kernels use)

The GEMM runs in a child process whose environment has OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
removed (set on some machines here for old OpenBLAS builds; they slow a current one), or
OPENBLAS_CORETYPE set to PEER_OPENBLAS_CORETYPE when given, and reports which OpenBLAS kernel
ran (threadpoolctl).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

GEMM_CHILD = r"""
import json, time, numpy as np
n = 2048
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
a @ b
best = 1e30
for _ in range(7):
    t0 = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t0)
info = {}
try:
    from threadpoolctl import threadpool_info
    info = [{k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for d in threadpool_info()]
except Exception as e:  # threadpoolctl missing: still report the number
    info = str(e)
print(json.dumps({"gflop_s": 2 * n ** 3 / best / 1e9, "n": n, "blas": info}))
"""


def stream_read_binary(build_dir):
    exe = os.path.join(build_dir, "stream_read")
    src = os.path.join(HERE, "stream_read.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O3", "-march=native", "-fopenmp", src, "-o", exe], check=True)
    return exe


def read_bandwidth(build_dir, threads):
    exe = stream_read_binary(build_dir)
    out = subprocess.run([exe, str(threads), "1024", "8"], check=True, capture_output=True,
                         text=True, env=dict(os.environ, OMP_PROC_BIND="spread"))
    return json.loads(out.stdout)["gb_s"]


def gemm_peak(threads):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    # PEER_OPENBLAS_CORETYPE (run_peer.sh PEER_ISA=avx2: Haswell) picks OpenBLAS's kernels for
    # a forced lower level's bound.
    if os.environ.get("PEER_OPENBLAS_CORETYPE"):
        env["OPENBLAS_CORETYPE"] = os.environ["PEER_OPENBLAS_CORETYPE"]
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", GEMM_CHILD], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout)


def measure(build_dir, threads=2):
    return {
        "read_gb_s_1t": read_bandwidth(build_dir, 1),
        f"read_gb_s_{threads}t": read_bandwidth(build_dir, threads),
        "sgemm": gemm_peak(threads),
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1] if len(sys.argv) > 1 else "build/peer"), indent=1))
