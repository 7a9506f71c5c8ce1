#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#endif

namespace edgevl::cpu {

namespace {

// True on pool workers and on a dispatching caller while it works: a parallel_for issued from
// there runs serially instead of deadlocking on the single job slot.
thread_local bool tl_inside_pool = false;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// How long a dispatcher polls for stragglers before yielding its core.
constexpr int kSpinIterations = 1 << 14;

// How long an idle worker polls before sleeping in the kernel, by the clock (a pause takes from a
// few ns to ~50 ns depending on the CPU). A decode step issues a few hundred dispatches with gaps
// of a few microseconds, so within a token the workers stay awake and a dispatch costs no futex
// wake; between tokens (logits copy, sampling) they may sleep once. Not longer: on a machine
// shared with other processes a worker that spins through its time slice is preempted when the
// next job arrives (2 threads, 7 tasks of 2.5 us, load ~5: the worker ran 3-8% of the tasks with
// ~320 us of polling, 17-47% with ~40 us), while a worker that slept is woken with priority.
constexpr auto kIdleSpin = std::chrono::microseconds(50);

// Sleep while *word == expected / wake all sleepers. Raw futex on Linux: GCC 12's
// std::atomic::wait/notify lost wake-ups under this exact pattern (workers hung in the kernel).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
#else
  word->wait(expected, std::memory_order_seq_cst);
#endif
}
void futex_wake_all(std::atomic<uint32_t>* word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
#else
  word->notify_all();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&generation_);
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on_current_job() {
  const int64_t n = n_, chunk = chunk_;
  for (;;) {
    const int64_t b = next_.fetch_add(chunk, std::memory_order_relaxed);
    if (b >= n) return;
    const int64_t e = std::min(n, b + chunk);
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        for (int64_t i = b; i < e; ++i) fn_(ctx_, i);
      } catch (...) {
        if (!failed_.exchange(true)) error_ = std::current_exception();
      }
    }
    // After a failure the remaining chunks are still claimed and counted, just not run.
    done_.fetch_add(e - b, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  tl_inside_pool = true;
  // Not a load: a dispatch may already have bumped the generation before this thread started.
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int spin = 1; g == seen; ++spin) {
        cpu_relax();
        g = generation_.load(std::memory_order_acquire);
        if (spin % 64 == 0 && std::chrono::steady_clock::now() - t0 > kIdleSpin) break;
      }
    }
    while (g == seen) {
      // Dekker-style handshake with run(): either run() sees sleepers_ > 0 and wakes us, or we
      // see the new generation here (and futex_wait returns at once if it changed meanwhile).
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(&generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    // Join the job. Second handshake: either the dispatcher sees active_ > 0 and waits for us
    // before rewriting the job, or we see writing_ and back off until it is published.
    active_.fetch_add(1, std::memory_order_seq_cst);
    if (writing_.load(std::memory_order_seq_cst)) {
      active_.fetch_sub(1, std::memory_order_seq_cst);
      cpu_relax();
      continue;  // `seen` unchanged: we will pick up the generation being published
    }
    // Possibly newer than g: then the job fields are that generation's (stable while active_).
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) {
      active_.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    work_on_current_job();
    active_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || tl_inside_pool ||
      busy_.test_and_set(std::memory_order_acquire)) {
    for (int64_t i = 0; i < n; ++i) fn(ctx, i);
    return;
  }
  // Workers still inside the previous job (only claiming past its end) must leave it before its
  // fields change; workers that never joined it are not waited for.
  writing_.store(true, std::memory_order_seq_cst);
  for (int spin = 0; active_.load(std::memory_order_seq_cst) != 0; ++spin) {
    if (spin < kSpinIterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  // Several chunks per thread so uneven tasks balance, but not one atomic per tiny index.
  chunk_ = std::max<int64_t>(1, n / (int64_t(n_threads_) * 4));
  next_.store(0, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  generation_.fetch_add(1, std::memory_order_seq_cst);
  writing_.store(false, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation_);

  tl_inside_pool = true;
  work_on_current_job();
  tl_inside_pool = false;

  for (int spin = 0; done_.load(std::memory_order_acquire) != n; ++spin) {
    if (spin < kSpinIterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  std::exception_ptr err = error_;
  error_ = nullptr;
  busy_.clear(std::memory_order_release);
  if (err) std::rethrow_exception(err);
}

}  // namespace edgevl::cpu
