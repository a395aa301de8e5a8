// perf/check_ids.cc — `flurry-check-ids`: the duplicate check of the benchmark tools
// (perf/id_ranges.h) over span files, for the IDs a run collected in another process:
// scripts/chaos hands it its ledger, perf/memif_compare the spans of every flurryd run.
//
// Contract:
//   * A span file is (first, count) pairs of little-endian u64, 16 bytes each
//     (flurry-bench-dpdk --ids-out); every file given is read into one list of spans.
//   * Prints the IDs, spans and duplicate IDs (with multiplicity, id_ranges.h) and how long the
//     check took; --json one object. Exit 0: no duplicate; 1: duplicates (or, with --compare,
//     the two checkers disagree); 2: bad options or an unreadable / malformed file.
//   * --method parallel (default, oneTBB: count_duplicate_ids_parallel) or serial (the one-thread
//     reference); --compare runs both on copies of the same spans, --reps times, alternating
//     which goes first, and reports each one's times.
//   * --generate FILE writes a test file instead: --spans disjoint spans of 1..--span-max IDs,
//     shuffled, then --plant spans that repeat part of an earlier one (each planted span's
//     duplicate IDs are known, so the expected figure is printed).
//   flurry-check-ids --compare --reps 5 /tmp/ids-*.bin
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/cli.h"
#include "perf/id_ranges.h"

namespace cli = flurry::cli;

namespace {

using flurry::perf::IdSpan;

bool read_spans(const std::string& path, std::vector<IdSpan>& spans, std::string& error) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return error = fmt::format("{}: {}", path, std::strerror(errno)), false;
  std::fseek(in, 0, SEEK_END);
  const long size = std::ftell(in);
  std::fseek(in, 0, SEEK_SET);
  if (size < 0 || size % 16 != 0) {
    std::fclose(in);
    return error = fmt::format("{}: {} bytes, not a whole number of 16-byte spans", path, size), false;
  }
  const std::size_t before = spans.size();
  spans.resize(before + static_cast<std::size_t>(size) / 16);
  static_assert(sizeof(IdSpan) == 16);
  const std::size_t got = std::fread(spans.data() + before, 16, spans.size() - before, in);
  std::fclose(in);
  if (got != spans.size() - before) return error = fmt::format("{}: short read", path), false;
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Timed {
  std::uint64_t duplicates = 0;
  double seconds = 0;
};

Timed run(const std::vector<IdSpan>& spans, bool parallel, unsigned threads) {
  std::vector<IdSpan> copy = spans;  // each run sorts its own copy of the same spans
  const auto start = std::chrono::steady_clock::now();
  Timed t;
  t.duplicates = parallel ? flurry::perf::count_duplicate_ids_parallel(copy, threads)
                          : flurry::perf::count_duplicate_ids(copy);
  t.seconds = seconds_since(start);
  return t;
}

int generate(const std::string& path, std::uint64_t count, std::uint64_t span_max, std::uint64_t plant,
             std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<IdSpan> spans;
  spans.reserve(count + plant);
  std::uint64_t next = 1'000'000;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t n = 1 + random() % span_max;
    spans.push_back({next, n});
    next += n + random() % 3;  // sometimes a gap
  }
  // Each planted span repeats the head of a random earlier span: exactly `n` duplicate IDs.
  std::uint64_t expected = 0;
  for (std::uint64_t i = 0; i < plant && count != 0; ++i) {
    const IdSpan& victim = spans[random() % count];
    const std::uint64_t n = 1 + random() % victim.count;
    spans.push_back({victim.first, n});
    expected += n;
  }
  std::shuffle(spans.begin(), spans.end(), random);
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr || std::fwrite(spans.data(), 16, spans.size(), out) != spans.size() ||
      std::fclose(out) != 0) {
    std::fprintf(stderr, "flurry-check-ids: --generate %s: %s\n", path.c_str(), std::strerror(errno));
    return 2;
  }
  std::uint64_t ids = 0;
  for (const IdSpan& span : spans) ids += span.count;
  fmt::print("{}: {} spans, {} IDs, {} duplicate IDs planted (seed {})\n", path, spans.size(), ids, expected,
             seed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cli::App app{"flurry-check-ids — count the IDs that occur more than once in span files"};
  app.option_defaults()->always_capture_default();
  std::vector<std::string> files;
  std::string method = "parallel";
  bool compare = false, json = false;
  unsigned threads = 0, reps = 3;
  std::string generate_path;
  std::uint64_t spans_wanted = 10'000'000, span_max = 200, plant = 10, seed = 1;
  app.add_option("files", files, "span files: (first, count) pairs of little-endian u64");
  app.add_option("--method", method, "parallel (oneTBB) or serial")
      ->check(cli::IsMember({"parallel", "serial"}));
  app.add_flag("--compare", compare, "run both checkers on the same spans and compare them");
  app.add_option("--reps", reps, "with --compare: runs of each")->check(cli::Range(1U, 100U));
  app.add_option("--threads", threads, "parallel: threads (0: every core)");
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--generate", generate_path, "write a test span file here instead of checking");
  app.add_option("--spans", spans_wanted, "--generate: disjoint spans");
  app.add_option("--span-max", span_max, "--generate: most IDs a span")->check(cli::Range(1U, 1U << 30));
  app.add_option("--plant", plant, "--generate: spans that repeat part of an earlier one");
  app.add_option("--seed", seed, "--generate: random seed");
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!generate_path.empty()) return generate(generate_path, spans_wanted, span_max, plant, seed);
  if (files.empty()) {
    std::fprintf(stderr, "flurry-check-ids: name at least one span file (or --generate FILE)\n");
    return 2;
  }
  std::vector<IdSpan> spans;
  std::string error;
  const auto read_start = std::chrono::steady_clock::now();
  for (const std::string& file : files) {
    if (!read_spans(file, spans, error)) {
      std::fprintf(stderr, "flurry-check-ids: %s\n", error.c_str());
      return 2;
    }
  }
  const double read_seconds = seconds_since(read_start);
  std::uint64_t ids = 0;
  for (const IdSpan& span : spans) ids += span.count;

  nlohmann::json out = {
      {"files", files.size()}, {"spans", spans.size()}, {"ids", ids}, {"read_seconds", read_seconds}};
  int code = 0;
  if (!compare) {
    const Timed t = run(spans, method == "parallel", threads);
    out["method"] = method;
    out["duplicates"] = t.duplicates;
    out["seconds"] = t.seconds;
    code = t.duplicates == 0 ? 0 : 1;
    if (!json) {
      fmt::print("{} spans, {} IDs: {} duplicate IDs ({} check, {:.3f} s)\n", spans.size(), ids, t.duplicates,
                 method, t.seconds);
    }
  } else {
    std::vector<double> serial, parallel;
    std::uint64_t serial_duplicates = 0, parallel_duplicates = 0;
    for (unsigned rep = 0; rep < reps; ++rep) {
      for (int k = 0; k < 2; ++k) {
        const bool is_parallel = (rep + static_cast<unsigned>(k)) % 2 == 1;  // alternate which goes first
        const Timed t = run(spans, is_parallel, threads);
        (is_parallel ? parallel : serial).push_back(t.seconds);
        (is_parallel ? parallel_duplicates : serial_duplicates) = t.duplicates;
      }
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    out["duplicates"] = serial_duplicates;
    out["parallel_duplicates"] = parallel_duplicates;
    out["serial_seconds"] = serial;
    out["parallel_seconds"] = parallel;
    out["serial_median_seconds"] = median(serial);
    out["parallel_median_seconds"] = median(parallel);
    code = serial_duplicates != parallel_duplicates || serial_duplicates != 0 ? 1 : 0;
    if (!json) {
      const auto range = [](const std::vector<double>& v) {
        return fmt::format("{:.3f}-{:.3f} s", *std::min_element(v.begin(), v.end()),
                           *std::max_element(v.begin(), v.end()));
      };
      fmt::print("{} spans, {} IDs, read in {:.2f} s; {} runs of each on copies of the same spans:\n",
                 spans.size(), ids, read_seconds, reps);
      fmt::print("  serial (std::sort, one sweep):       median {:.3f} s, min-max {}\n", median(serial),
                 range(serial));
      fmt::print("  parallel (tbb::parallel_sort, sweep): median {:.3f} s, min-max {}\n", median(parallel),
                 range(parallel));
      fmt::print("  duplicate IDs: serial {}, parallel {}{}\n", serial_duplicates, parallel_duplicates,
                 serial_duplicates == parallel_duplicates ? "" : "  DISAGREE");
    }
  }
  if (json) std::puts(out.dump().c_str());
  return code;
}
