// tests/support/temp_dir.cc — see temp_dir.h.
#include "tests/support/temp_dir.h"

#include <errno.h>
#include <stdlib.h>

#include <filesystem>
#include <system_error>

namespace flurry::testing {

TempDir::TempDir() : TempDir(std::string(program_invocation_short_name) + "-") {}

TempDir::TempDir(const std::string& prefix) : TempDir(prefix, "/tmp") {}

TempDir::TempDir(const std::string& prefix, const std::string& base) {
  std::string pattern = base + "/" + prefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace flurry::testing
