// perf/bench_util.h — what the load generators share (flurry-bench, peer-bench): an IPv4
// ADDR:PORT parsed strictly, and the process's own CPU time (so a report can show when the
// generator, not the server, was the bottleneck).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <charconv>
#include <optional>
#include <string>

namespace flurry::perf {

// "IPv4ADDR:PORT" (port 1..65535, nothing after it), or nullopt.
inline std::optional<sockaddr_in> parse_ipv4_endpoint(const std::string& text) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  const auto colon = text.rfind(':');
  if (colon == std::string::npos ||
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &address.sin_addr) != 1) {
    return std::nullopt;
  }
  unsigned port = 0;
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data() + colon + 1, end, port);
  if (parsed.ec != std::errc{} || parsed.ptr != end || port == 0 || port > 65535) return std::nullopt;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  return address;
}

// User + system CPU seconds of this process so far.
inline double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace flurry::perf
