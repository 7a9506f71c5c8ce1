// Streaming read bandwidth: sums a large buffer (default 1 GiB) with T threads (OpenMP),
// best of several passes. Prints one JSON line: {"threads", "bytes", "gb_s"}.
// Build: cc -O3 -march=native -fopenmp stream_read.c -o stream_read
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The widest integer vector this build targets (-march=native): AVX-512 where the CPU has it,
// else AVX2, so the figure is the same load stream the kernels of that CPU issue.
#ifdef __AVX512F__
typedef __m512i vec;
static inline vec vzero(void) {
  return _mm512_setzero_si512();
}
static inline vec vadd(vec a, vec b) {
  return _mm512_add_epi64(a, b);
}
static inline vec vload(const vec* p) {
  return _mm512_load_si512(p);
}
static inline vec vset(long long x) {
  return _mm512_set1_epi64(x);
}
static inline long long vsum(vec a) {
  return _mm512_reduce_add_epi64(a);
}
#else
typedef __m256i vec;
static inline vec vzero(void) {
  return _mm256_setzero_si256();
}
static inline vec vadd(vec a, vec b) {
  return _mm256_add_epi64(a, b);
}
static inline vec vload(const vec* p) {
  return _mm256_load_si256(p);
}
static inline vec vset(long long x) {
  return _mm256_set1_epi64x(x);
}
static inline long long vsum(vec a) {
  long long t[4];
  _mm256_storeu_si256((__m256i*)t, a);
  return t[0] + t[1] + t[2] + t[3];
}
#endif

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
  for (size_t i = 0; i < n; ++i) buf[i] = vset((long long)i);
  double best = 1e30;
  long long sink = 0;
  for (int p = 0; p < passes; ++p) {
    const double t0 = now();
    long long total = 0;
#pragma omp parallel reduction(+ : total)
    {
      vec a0 = vzero(), a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 4) {
        a0 = vadd(a0, vload(buf + i));
        a1 = vadd(a1, vload(buf + i + 1));
        a2 = vadd(a2, vload(buf + i + 2));
        a3 = vadd(a3, vload(buf + i + 3));
      }
      total += vsum(vadd(vadd(a0, a1), vadd(a2, a3)));
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
