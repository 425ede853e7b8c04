// SPDX-License-Identifier: Apache-2.0
/// @file Exhaustive sweeps (all f32 encodings, all bf16 pairs): threaded, chunked, resumable.
///
/// A sweep splits [0, total) into chunks, runs them on std::threads and merges the results in input
/// order, so the report does not depend on the thread count. With a checkpoint file every finished
/// chunk is appended as one line; a later run with the same file skips those chunks and adds their
/// counts (a killed run loses at most the chunks in flight). No GoogleTest dependency.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tiebreak::testing {

/// How a sweep runs.
struct sweep_options {
  unsigned threads = 0;                  ///< 0: std::thread::hardware_concurrency()
  std::uint64_t chunk_size = 1u << 22;   ///< inputs per chunk (4M: 1024 chunks for 2^32)
  std::string checkpoint;                ///< file recording finished chunks; empty: no resume
  std::string name = "sweep";            ///< recorded in the checkpoint; a file of another sweep is refused
  std::uint64_t stride = 1;              ///< check only inputs i with i % stride == 0 (quick runs; odd strides
                                         ///< avoid aliasing with the bit fields)
  std::uint64_t max_chunks = 0;          ///< finish at most this many new chunks in this run (0: all);
                                         ///< the rest is left for a resumed run
  std::size_t max_reported = 8;          ///< mismatches kept in the report (the smallest inputs)
};

/// One failed input: the input's index (the f32 encoding, or (a << 16) | b for bf16 pairs) and, when
/// the check supplied them, the got and expected encodings.
struct sweep_mismatch {
  std::uint64_t input = 0;
  std::uint64_t got = 0;
  std::uint64_t expected = 0;
  friend bool operator==(const sweep_mismatch&, const sweep_mismatch&) = default;
};

/// What a per-input check returns when it wants got/expected in the report (a plain bool also works).
struct sweep_check {
  bool ok = true;
  std::uint64_t got = 0;
  std::uint64_t expected = 0;
};

/// Result of a sweep, including the chunks a checkpoint said were already done.
struct sweep_report {
  std::uint64_t total = 0;           ///< size of the input space
  std::uint64_t checked = 0;         ///< inputs checked, this run and resumed runs together
  std::uint64_t mismatches = 0;      ///< failed inputs, this run and resumed runs together
  std::uint64_t chunks_total = 0;
  std::uint64_t chunks_done = 0;     ///< finished chunks after this run (resumed + new)
  std::uint64_t chunks_resumed = 0;  ///< chunks skipped because the checkpoint had them
  bool complete = false;             ///< every chunk is done
  std::vector<sweep_mismatch> first_mismatches;  ///< up to max_reported, smallest inputs first

  /// "sweep: 4294967296 checked, 3 mismatches (1024/1024 chunks, 512 resumed); first: 0x7f800001 got 0x7f80 expected 0x7fff".
  std::string summary() const {
    std::ostringstream s;
    s << "sweep: " << checked << " checked, " << mismatches << " mismatches (" << chunks_done << "/" << chunks_total
      << " chunks, " << chunks_resumed << " resumed" << (complete ? "" : ", INCOMPLETE") << ")";
    if (!first_mismatches.empty()) {
      s << "; first:" << std::hex;
      for (const auto& m : first_mismatches) {
        s << " 0x" << m.input << " got 0x" << m.got << " expected 0x" << m.expected << ";";
      }
    }
    return s.str();
  }
};

/// Collects the mismatches of one chunk; passed to chunk functions of `sweep`.
class sweep_sink {
 public:
  explicit sweep_sink(std::size_t keep) : keep_(keep) {}
  /// Records a failed input. Inputs must be reported in increasing order within a chunk.
  void mismatch(std::uint64_t input, std::uint64_t got = 0, std::uint64_t expected = 0) {
    ++count_;
    if (first_.size() < keep_) first_.push_back({input, got, expected});
  }
  std::uint64_t count() const noexcept { return count_; }
  const std::vector<sweep_mismatch>& first() const noexcept { return first_; }

 private:
  std::size_t keep_;
  std::uint64_t count_ = 0;
  std::vector<sweep_mismatch> first_;
};

namespace detail {

struct chunk_record {
  bool done = false;
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  std::vector<sweep_mismatch> first;
};

inline std::string checkpoint_header(const std::string& name, std::uint64_t total, const sweep_options& o) {
  std::string n = name.empty() ? "sweep" : name;
  std::replace_if(n.begin(), n.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; }, '_');
  std::ostringstream s;
  s << "tiebreak-sweep 1 name=" << n << " total=" << total << " chunk=" << o.chunk_size << " stride=" << o.stride;
  return s.str();
}

/// Reads finished chunks from a checkpoint:
///   tiebreak-sweep 1 name=<name> total=<n> chunk=<c> stride=<s>
///   chunk <index> <checked> <mismatches> <k> [<input> <got> <expected>] x k end
/// A missing file is an empty checkpoint; a file of another sweep throws std::runtime_error; a line
/// that is torn (the run died while writing it) or otherwise incomplete is ignored: its chunk reruns.
inline void read_checkpoint(const std::string& path, const std::string& header, std::vector<chunk_record>& chunks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // torn line
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line_no++ == 0) {
      if (line != header) {
        throw std::runtime_error("tiebreak::testing::sweep: checkpoint " + path + " belongs to another sweep (\"" +
                                 line + "\", expected \"" + header + "\")");
      }
      continue;
    }
    std::istringstream ls(line);
    std::string tag;
    std::uint64_t idx = 0, checked = 0, count = 0, nfirst = 0;
    if (!(ls >> tag >> idx >> checked >> count >> nfirst) || tag != "chunk" || idx >= chunks.size()) continue;
    chunk_record rec;
    rec.done = true;
    rec.checked = checked;
    rec.mismatches = count;
    bool ok = nfirst <= count;
    for (std::uint64_t i = 0; ok && i < nfirst; ++i) {
      sweep_mismatch m;
      if (!(ls >> m.input >> m.got >> m.expected)) ok = false;
      rec.first.push_back(m);
    }
    std::string end, extra;
    ok = ok && (ls >> end) && end == "end" && !(ls >> extra);  // a line counts only when complete
    if (ok) chunks[idx] = std::move(rec);
  }
  if (line_no == 0 && !text.empty()) {
    throw std::runtime_error("tiebreak::testing::sweep: checkpoint " + path + " has no complete header line");
  }
}

inline std::string checkpoint_line(std::uint64_t idx, const chunk_record& r) {
  std::ostringstream s;
  s << "chunk " << idx << ' ' << r.checked << ' ' << r.mismatches << ' ' << r.first.size();
  for (const auto& m : r.first) s << ' ' << m.input << ' ' << m.got << ' ' << m.expected;
  s << " end\n";
  return s.str();
}

}  // namespace detail

/// Runs `chunk_fn(begin, end, stride, sink)` over [0, total) in chunks; the function checks the inputs
/// i in [begin, end) with i % stride == 0 and reports failures with sink.mismatch(i, got, expected),
/// in increasing order. It is called concurrently from `threads` threads and must be thread-safe
/// (a GPU-batched check can set threads = 1). Returns the merged report; an exception thrown by
/// chunk_fn stops the sweep and is rethrown after the threads are joined (finished chunks stay
/// recorded in the checkpoint).
template <class ChunkFn>
sweep_report sweep(std::uint64_t total, ChunkFn&& chunk_fn, const sweep_options& opt = {}) {
  if (opt.chunk_size == 0 || opt.stride == 0) throw std::invalid_argument("sweep: chunk_size and stride must be > 0");
  const std::uint64_t nchunks = (total + opt.chunk_size - 1) / opt.chunk_size;
  std::vector<detail::chunk_record> chunks(nchunks);
  const std::string header = detail::checkpoint_header(opt.name, total, opt);

  std::ofstream ckpt;
  if (!opt.checkpoint.empty()) {
    detail::read_checkpoint(opt.checkpoint, header, chunks);
    std::ifstream probe(opt.checkpoint, std::ios::binary);
    std::string old((std::istreambuf_iterator<char>(probe)), std::istreambuf_iterator<char>());
    probe.close();
    ckpt.open(opt.checkpoint, std::ios::binary | std::ios::app);
    if (!ckpt) throw std::runtime_error("sweep: cannot open checkpoint " + opt.checkpoint);
    if (old.empty()) ckpt << header << '\n' << std::flush;
    else if (old.back() != '\n') ckpt << '\n' << std::flush;  // end a torn line before appending
  }

  sweep_report rep;
  rep.total = total;
  rep.chunks_total = nchunks;
  std::vector<std::uint64_t> pending;
  for (std::uint64_t i = 0; i < nchunks; ++i) {
    if (chunks[i].done) ++rep.chunks_resumed;
    else pending.push_back(i);
  }
  const std::uint64_t budget = opt.max_chunks == 0 ? pending.size() : std::min<std::uint64_t>(opt.max_chunks, pending.size());

  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::uint64_t k = next.fetch_add(1);
      if (k >= budget) return;
      const std::uint64_t idx = pending[k];
      const std::uint64_t begin = idx * opt.chunk_size;
      const std::uint64_t end = std::min(total, begin + opt.chunk_size);
      detail::chunk_record rec;
      try {
        sweep_sink sink(opt.max_reported);
        chunk_fn(begin, end, opt.stride, sink);
        const std::uint64_t first = (begin + opt.stride - 1) / opt.stride * opt.stride;
        rec.checked = first >= end ? 0 : (end - 1 - first) / opt.stride + 1;
        rec.mismatches = sink.count();
        rec.first = sink.first();
        rec.done = true;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        stop = true;
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (ckpt.is_open()) ckpt << detail::checkpoint_line(idx, rec) << std::flush;
      chunks[idx] = std::move(rec);
    }
  };
  unsigned nthreads = opt.threads != 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  nthreads = static_cast<unsigned>(std::min<std::uint64_t>(nthreads, std::max<std::uint64_t>(budget, 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);

  for (const auto& c : chunks) {
    if (!c.done) continue;
    ++rep.chunks_done;
    rep.checked += c.checked;
    rep.mismatches += c.mismatches;
    for (const auto& m : c.first) {
      if (rep.first_mismatches.size() < opt.max_reported) rep.first_mismatches.push_back(m);
    }
  }
  rep.complete = rep.chunks_done == nchunks;
  return rep;
}

namespace detail {

template <class Fn, class... Args>
void run_check(Fn& fn, sweep_sink& sink, std::uint64_t index, Args... args) {
  using R = std::invoke_result_t<Fn&, Args...>;
  if constexpr (std::is_same_v<R, bool>) {
    if (!fn(args...)) sink.mismatch(index);
  } else {
    static_assert(std::is_convertible_v<R, sweep_check>, "a sweep check returns bool or sweep_check");
    const sweep_check c = fn(args...);
    if (!c.ok) sink.mismatch(index, c.got, c.expected);
  }
}

}  // namespace detail

/// Calls `fn(std::uint32_t bits)` for every f32 encoding (2^32 of them; fewer with a stride), from
/// several threads; `fn` returns true / sweep_check{ok, got, expected}. Inputs in the report are f32
/// encodings. Precondition: fn is thread-safe.
template <class Fn>
sweep_report for_all_f32(Fn&& fn, sweep_options opt = {}) {
  if (opt.name == "sweep") opt.name = "f32";
  return sweep(
      std::uint64_t{1} << 32,
      [&fn](std::uint64_t begin, std::uint64_t end, std::uint64_t stride, sweep_sink& sink) {
        for (std::uint64_t i = (begin + stride - 1) / stride * stride; i < end; i += stride) {
          detail::run_check(fn, sink, i, static_cast<std::uint32_t>(i));
        }
      },
      opt);
}

/// Calls `fn(std::uint16_t a, std::uint16_t b)` for every pair of bf16 encodings (2^32 pairs; a is
/// the high half of the input index (a << 16) | b). Same contract as for_all_f32.
template <class Fn>
sweep_report for_all_bf16_pairs(Fn&& fn, sweep_options opt = {}) {
  if (opt.name == "sweep") opt.name = "bf16-pairs";
  return sweep(
      std::uint64_t{1} << 32,
      [&fn](std::uint64_t begin, std::uint64_t end, std::uint64_t stride, sweep_sink& sink) {
        for (std::uint64_t i = (begin + stride - 1) / stride * stride; i < end; i += stride) {
          detail::run_check(fn, sink, i, static_cast<std::uint16_t>(i >> 16), static_cast<std::uint16_t>(i & 0xffffu));
        }
      },
      opt);
}

}  // namespace tiebreak::testing
