#pragma once
// The server's counters and histograms, rendered in Prometheus' text format at /metrics.
// Everything is updated under one mutex: a handful of updates per request and per token.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace edgevl::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // Appends the _bucket / _sum / _count lines of `name`.
  void render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& endpoint, int status);
  void tokens(int64_t prompt, int64_t reused, int64_t generated);
  void ttft(double seconds) {
    std::lock_guard l(mu_);
    ttft_.observe(seconds);
  }
  void decode_token(double seconds) {
    std::lock_guard l(mu_);
    per_token_.observe(seconds);
  }
  // `steps` decode steps over `rows` sequences each.
  void decode_step(int64_t rows, int64_t steps = 1) {
    std::lock_guard l(mu_);
    steps_ += steps;
    rows_ += rows * steps;
  }
  void cancelled() {
    std::lock_guard l(mu_);
    ++cancelled_;
  }
  void image(bool cache_hit);
  void set_queue(int64_t queued, int64_t active) {
    std::lock_guard l(mu_);
    queued_ = queued;
    active_ = active;
  }
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_ = 0, reused_ = 0, generated_ = 0, cancelled_ = 0, images_ = 0, image_hits_ = 0;
  int64_t queued_ = 0, active_ = 0, steps_ = 0, rows_ = 0;
  Histogram ttft_, per_token_;
};

}  // namespace edgevl::server
