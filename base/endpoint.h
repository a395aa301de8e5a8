// base/endpoint.h — an IPv4 ADDR:PORT, parsed once where a flag or config key gives it
// (--listen, --metrics-listen, the front doors' --*-listen) and carried typed from there:
// nobody downstream splits a string again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace flurry {

struct Endpoint {
  std::string address;     // dotted IPv4, e.g. 127.0.0.1 or 0.0.0.0
  std::uint16_t port = 0;  // 1..65535; 0: none (a door that is off)

  bool enabled() const { return port != 0; }
  // "ADDR:PORT"; "" when none.
  std::string text() const { return enabled() ? address + ":" + std::to_string(port) : std::string(); }
  bool operator==(const Endpoint&) const = default;
};

// "ADDR:PORT", ADDR an IPv4 address and PORT 1..65535. The error names the part that is wrong,
// prefixed with what the caller calls the text (`what`: a flag, "--listen") and ending with
// `example` (a valid value) or `address_hint` (which addresses make sense there).
Result<Endpoint> parse_endpoint(std::string_view text, std::string_view what, std::string_view example,
                                std::string_view address_hint);

}  // namespace flurry
