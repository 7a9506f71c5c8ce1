#pragma once
// The one timing helper of the runtime and the CLI: milliseconds since a steady-clock point.
#include <chrono>

namespace edgevl {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace edgevl
