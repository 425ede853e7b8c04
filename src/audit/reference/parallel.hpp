// SPDX-License-Identifier: Apache-2.0
/// @file A minimal work loop over independent items with std::thread (internal to the reference).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tiebreak::reference::detail {

/// Calls f(i) for i in [0, n) on up to `threads` threads (0: hardware concurrency); items are
/// taken in increasing order. The first exception thrown by f is rethrown after all threads stop.
template <class F>
void parallel_for(std::size_t n, unsigned threads, F&& f) {
  unsigned t = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  t = static_cast<unsigned>(std::min<std::size_t>(t, n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::size_t i; !stop.load() && (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tiebreak::reference::detail
