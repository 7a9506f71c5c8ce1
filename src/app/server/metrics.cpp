#include "app/server/metrics.h"

#include <fmt/format.h>

namespace edgevl::server {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name,
                      sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      per_token_({0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard l(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::tokens(int64_t prompt, int64_t reused, int64_t generated) {
  std::lock_guard l(mu_);
  prompt_ += prompt;
  reused_ += reused;
  generated_ += generated;
}

void Metrics::image(bool cache_hit) {
  std::lock_guard l(mu_);
  ++images_;
  image_hits_ += cache_hit;
}

std::string Metrics::render() const {
  std::lock_guard l(mu_);
  std::string out;
  out +=
      "# HELP edgevl_requests_total HTTP requests by endpoint and status.\n"
      "# TYPE edgevl_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("edgevl_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);
  const auto counter = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  const auto gauge = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("edgevl_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_);
  counter("edgevl_prompt_tokens_reused_total", "Prompt tokens taken from a kept KV prefix.",
          reused_);
  counter("edgevl_generated_tokens_total", "Tokens generated.", generated_);
  counter("edgevl_cancelled_total", "Generations cancelled (client gone or time limit).",
          cancelled_);
  counter("edgevl_images_total", "Images received.", images_);
  counter("edgevl_image_cache_hits_total", "Images whose features came from the cache.",
          image_hits_);
  counter("edgevl_decode_steps_total", "Decode steps (each over one or more sequences).", steps_);
  counter("edgevl_decode_rows_total",
          "Sequences summed over decode steps (/ steps: the mean batch).", rows_);
  gauge("edgevl_queue_depth", "Requests waiting for a slot.", queued_);
  gauge("edgevl_active_slots", "Slots generating now.", active_);
  ttft_.render("edgevl_time_to_first_token_seconds",
               "From the request's arrival to its first generated token.", &out);
  per_token_.render("edgevl_decode_seconds_per_token", "Time between generated tokens.", &out);
  return out;
}

}  // namespace edgevl::server
