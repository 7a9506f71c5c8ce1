#pragma once
// Persistent worker pool for the kernels. A dispatch publishes (fn pointer, ctx, n) and bumps a
// generation counter; workers spin briefly and then sleep on it with a futex, so a dispatch
// costs no allocation and at most one futex wake (none while the workers are still spinning).
// The dispatcher returns as soon as all indices are done: it never waits for a worker that was
// descheduled and did not join, which matters when other processes compete for the cores.
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <type_traits>
#include <vector>

namespace edgevl::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads total, including the calling thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(i) for i in [0, n) over all threads (the caller participates) and returns when all
  // calls finished. A call from inside fn (nested), or while another thread is dispatching on
  // this pool, runs serially on the calling thread. The first exception thrown by fn is
  // rethrown here after the others finished.
  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run(
        n, [](void* ctx, int64_t i) { (*static_cast<Fn*>(ctx))(i); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t i);
  void run(int64_t n, TaskFn fn, void* ctx);
  void worker_loop();
  void work_on_current_job();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;  // a dispatch is in flight
  // Current job; written by the dispatcher only while `writing_` is set and no worker is
  // `active_`, then published by bumping `generation_`.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  alignas(64) std::atomic<int64_t> next_{0};         // next index to hand out
  alignas(64) std::atomic<int64_t> done_{0};         // indices completed (or skipped on error)
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped per dispatch; workers wait on it
  std::atomic<int> sleepers_{0};                     // workers inside futex_wait (or about to be)
  alignas(64) std::atomic<int> active_{0};           // workers currently reading the job
  std::atomic<bool> writing_{false};                 // dispatcher is rewriting the job fields
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
};

}  // namespace edgevl::cpu
