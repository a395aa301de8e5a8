// perf/id_ranges.cc — count_duplicate_ids_parallel (see id_ranges.h), with oneTBB.
#include "perf/id_ranges.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <vector>

namespace flurry::perf {

namespace {

// Below this many spans one thread is quicker than starting the others.
constexpr std::size_t parallel_min = std::size_t{1} << 16;

std::uint64_t count_in_arena(std::span<IdSpan> spans) {
  tbb::parallel_sort(spans.begin(), spans.end(), span_before);
  // Chunks of the sorted spans: a few per thread, so that a slow thread holds up little.
  const std::size_t chunks = std::min<std::size_t>(
      spans.size() / 4096 + 1, 4 * static_cast<std::size_t>(tbb::this_task_arena::max_concurrency()));
  const std::size_t per_chunk = (spans.size() + chunks - 1) / chunks;
  const auto chunk_begin = [&](std::size_t c) {
    return spans.data() + std::min(spans.size(), c * per_chunk);
  };
  // Pass 1: each chunk's furthest end (a max over its spans: order does not matter).
  std::vector<std::uint64_t> chunk_reach(chunks, 0);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, chunks, 1),
                    [&](const tbb::blocked_range<std::size_t>& r) {
                      for (std::size_t c = r.begin(); c != r.end(); ++c) {
                        std::uint64_t reach = 0;
                        for (const IdSpan* span = chunk_begin(c); span != chunk_begin(c + 1); ++span)
                          reach = std::max(reach, span_end(*span));
                        chunk_reach[c] = reach;
                      }
                    });
  // The reach each chunk starts from: the furthest end of every chunk before it.
  std::vector<std::uint64_t> reach_in(chunks, 0);
  for (std::size_t c = 1; c < chunks; ++c) reach_in[c] = std::max(reach_in[c - 1], chunk_reach[c - 1]);
  // Pass 2: every chunk sweeps from its reach; the sum is the serial sweep's, span for span.
  std::vector<std::uint64_t> duplicates(chunks, 0);
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, chunks, 1), [&](const tbb::blocked_range<std::size_t>& r) {
        for (std::size_t c = r.begin(); c != r.end(); ++c) {
          std::uint64_t ignored = 0;
          duplicates[c] = sweep_sorted(chunk_begin(c), chunk_begin(c + 1), reach_in[c], &ignored);
        }
      });
  std::uint64_t total = 0;
  for (const std::uint64_t d : duplicates) total += d;
  return total;
}

}  // namespace

std::uint64_t count_duplicate_ids_parallel(std::span<IdSpan> spans, unsigned threads) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot see the synchronization inside libtbb (not instrumented) and would
  // report its hand-offs as races: the sanitizer tree checks the serial path, which this equals.
  return count_duplicate_ids(spans);
#endif
  if (spans.size() < parallel_min || threads == 1) return count_duplicate_ids(spans);
  if (threads == 0) return count_in_arena(spans);
  tbb::task_arena arena(static_cast<int>(threads));
  return arena.execute([&] { return count_in_arena(spans); });
}

}  // namespace flurry::perf
