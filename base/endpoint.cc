// base/endpoint.cc — ADDR:PORT into an Endpoint (base/endpoint.h).
#include "base/endpoint.h"

#include <charconv>

namespace flurry {
namespace {

// A dotted-quad IPv4 address as inet_pton(AF_INET) takes it: four decimal parts of 0..255,
// no leading zeros, nothing else. (base/ includes only the standard library.)
bool is_ipv4(std::string_view text) {
  for (int part = 0; part < 4; ++part) {
    if (part != 0) {
      if (text.empty() || text.front() != '.') return false;
      text.remove_prefix(1);
    }
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 3 || (digits > 1 && text.front() == '0')) return false;
    unsigned value = 0;
    std::from_chars(text.data(), text.data() + digits, value);
    if (value > 255) return false;
    text.remove_prefix(digits);
  }
  return text.empty();
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view text, std::string_view what, std::string_view example,
                                std::string_view address_hint) {
  const std::string quoted = std::string(what) + " '" + std::string(text) + "'";
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Error{quoted + " must be ADDR:PORT, e.g. " + std::string(example)};
  }
  Endpoint endpoint;
  endpoint.address = std::string(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned number = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), number);
  if (error != std::errc{} || end != port_text.data() + port_text.size() || number == 0 || number > 65535) {
    return Error{quoted + ": port must be 1..65535"};
  }
  endpoint.port = static_cast<std::uint16_t>(number);
  if (!is_ipv4(endpoint.address)) {
    return Error{quoted + ": '" + endpoint.address + "' is not an IPv4 address (" +
                 std::string(address_hint) + ")"};
  }
  return endpoint;
}

}  // namespace flurry
