// tests/support/temp_dir.h — a private directory under /tmp for one test: made with mkdtemp
// (/tmp/<prefix>XXXXXX; the default prefix is the test binary's name), removed with everything
// in it when the TempDir goes out of scope. A directory that cannot be made throws
// std::system_error (GoogleTest reports it as a failure of the test that made it).
#pragma once

#include <string>

namespace flurry::testing {

class TempDir {
 public:
  TempDir();
  explicit TempDir(const std::string& prefix);
  // Under `base` instead of /tmp (/dev/shm: a state dir whose writes never wait on a disk).
  TempDir(const std::string& prefix, const std::string& base);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name (nothing is created).
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace flurry::testing
