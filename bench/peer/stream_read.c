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
  const size_t n = bytes / sizeof(__m512i);
  __m512i* buf = aligned_alloc(64, n * sizeof(__m512i));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = _mm512_set1_epi64((long long)i);
  double best = 1e30;
  long long sink = 0;
  for (int p = 0; p < passes; ++p) {
    const double t0 = now();
    long long total = 0;
#pragma omp parallel reduction(+ : total)
    {
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 4) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(buf + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(buf + i + 1));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(buf + i + 2));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(buf + i + 3));
      }
      total += _mm512_reduce_add_epi64(
          _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    }
    const double dt = now() - t0;
    sink += total;
    if (dt < best) best = dt;
  }
  printf("{\"threads\": %d, \"bytes\": %zu, \"gb_s\": %.3f, \"sink\": %lld}\n", threads,
         n * sizeof(__m512i), (double)(n * sizeof(__m512i)) / best / 1e9, sink & 1);
  free(buf);
  return 0;
}
