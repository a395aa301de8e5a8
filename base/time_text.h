// base/time_text.h — Unix milliseconds as the ISO-8601 UTC text every message and report
// uses: "2025-01-01T00:00:00.000Z". Standard library only.
#pragma once

#include <cstdint>
#include <string>

namespace flurry {

std::string format_unix_ms(std::uint64_t unix_ms);

}  // namespace flurry
