// Streaming read bandwidth: sums a large buffer (default 1 GiB) with T threads (OpenMP),
// best of several passes. Prints one JSON line: {"threads", "bytes", "gb_s"}.
// Build: cc -O3 -march=native -fopenmp stream_read.c -o stream_read
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The widest integer vector this build targets (-march=native): 64 bytes where the CPU has
// AVX-512, else 32 (AVX2), so the figure is the same load stream the kernels of that CPU issue.
// GCC vector extensions: + on two vectors is one vpaddq of that width.
#ifdef __AVX512F__
#define VEC_BYTES 64
#else
#define VEC_BYTES 32
#endif
typedef long long vec __attribute__((vector_size(VEC_BYTES)));
static inline long long vsum(vec a) {
  long long t = 0;
  for (int i = 0; i < VEC_BYTES / 8; ++i) t += a[i];
  return t;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  const size_t bytes = (argc > 2 ? strtoull(argv[2], 0, 10) : 1024ull) << 20;
  const int passes = argc > 3 ? atoi(argv[3]) : 8;
  omp_set_num_threads(threads);
  const size_t n = bytes / sizeof(vec);
  vec* buf = aligned_alloc(64, n * sizeof(vec));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = (vec){0} + (long long)i;
  double best = 1e30;
  long long sink = 0;
  for (int p = 0; p < passes; ++p) {
    const double t0 = now();
    long long total = 0;
#pragma omp parallel reduction(+ : total)
    {
      vec a0 = {0}, a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 4) {
        a0 += buf[i];
        a1 += buf[i + 1];
        a2 += buf[i + 2];
        a3 += buf[i + 3];
      }
      total += vsum(a0 + a1 + a2 + a3);
    }
    const double dt = now() - t0;
    sink += total;
    if (dt < best) best = dt;
  }
  printf("{\"threads\": %d, \"bytes\": %zu, \"gb_s\": %.3f, \"sink\": %lld}\n", threads,
         n * sizeof(vec), (double)(n * sizeof(vec)) / best / 1e9, sink & 1);
  free(buf);
  return 0;
}
