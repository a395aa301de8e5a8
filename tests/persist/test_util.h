// tests/persist/test_util.h — real-file helpers for the persist/ tests: raw byte access to
// files, a runner of a function in a forked child, TempDir (tests/support), and an independent
// encoder/decoder of the watermark slot format (written from the format comment in
// persist/watermark_store.cc, not from its code, so the tests pin the on-disk bytes).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "persist/identity.h"
#include "persist/watermark_store.h"
#include "tests/support/temp_dir.h"

namespace flurry::persist::testing {

// persist's Result APIs unwrapped for tests that check the pointer and then the message: the
// value, or null (nullopt) with *error set to the failure.
inline std::unique_ptr<WatermarkStore> open_store(const std::string& dir, const Identity& identity,
                                                  const OpenOptions& options, std::string* error) {
  Result<std::unique_ptr<WatermarkStore>> opened = WatermarkStore::open(dir, identity, options);
  if (opened.ok()) return std::move(opened).value();
  *error = opened.message();
  return nullptr;
}

inline std::optional<std::string> load_identity(const std::string& dir, std::string* error,
                                                Io* io = nullptr) {
  Result<std::string> id = load_or_create_instance_id(dir, io);
  if (id.ok()) return std::move(id).value();
  *error = id.message();
  return std::nullopt;
}

inline std::optional<std::string> replace_identity(const std::string& dir, std::string* error,
                                                   Io* io = nullptr) {
  Result<std::string> id = replace_instance_id(dir, io);
  if (id.ok()) return std::move(id).value();
  *error = id.message();
  return std::nullopt;
}

using flurry::testing::TempDir;

inline std::vector<std::uint8_t> read_file(const std::string& path) {
  std::vector<std::uint8_t> bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  std::array<std::uint8_t, 4096> chunk{};
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), f)) > 0) {
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::fclose(f);
  return bytes;
}

// Overwrites (or extends) the file at `offset` with `bytes`; no fsync (tests reopen from the
// page cache, which is what a restarted process would read too).
inline void write_at(const std::string& path, std::uint64_t offset, const std::vector<std::uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) throw std::runtime_error("short write " + path);
}

inline void write_whole(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) throw std::runtime_error("short write " + path);
}

inline void truncate_file(const std::string& path, std::uint64_t size) {
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
    throw std::runtime_error("cannot truncate " + path);
  }
}

inline std::uint32_t mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// Runs `body` in a forked child and returns its exit status (or 128 + signal). The child
// never returns into GoogleTest.
inline int run_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

inline std::string hex64(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// --- The slot format, versions 1 and 2 (little-endian; see persist/watermark_store.cc). ---
inline constexpr std::size_t slot_bytes = 128;  // a slot, either version (v1: 64 + zeros)
inline constexpr std::size_t v1_record_bytes = 64;
inline constexpr std::uint64_t slot_offset[2] = {0, 4096};
inline constexpr std::uint64_t watermark_file_bytes = 8192;

struct TestLayout {
  std::uint64_t epoch_ms = 0;
  std::uint32_t time_unit_ms = 0;
  std::uint8_t time_bits = 0;
  std::uint8_t node_bits = 0;
  std::uint8_t sequence_bits = 0;
  std::uint8_t core_bits = 0;
  std::uint8_t core_from = 0;
  bool operator==(const TestLayout&) const = default;
};

struct TestRecord {
  std::uint64_t sequence = 0;
  std::uint64_t watermark_t = 0;
  std::uint32_t node_id = 0;
  std::uint64_t layout_fingerprint = 0;
  std::uint64_t written_unix_ms = 0;
  std::uint32_t version = 2;  // the version field; the CRC position follows `v1_format`
  TestLayout layout;          // written only in version 2
  bool v1_format = false;     // true: the 64-byte version-1 encoding (CRC at 60)
};

// A version-1 record as flurryd before format 2 wrote it.
inline TestRecord v1_record(std::uint64_t sequence, std::uint64_t watermark_t, std::uint32_t node_id,
                            std::uint64_t layout_fingerprint, std::uint64_t written_unix_ms = 0,
                            std::uint32_t version = 1) {
  TestRecord r;
  r.sequence = sequence;
  r.watermark_t = watermark_t;
  r.node_id = node_id;
  r.layout_fingerprint = layout_fingerprint;
  r.written_unix_ms = written_unix_ms;
  r.version = version;
  r.v1_format = true;
  return r;
}

inline void put_le(std::vector<std::uint8_t>& out, std::size_t at, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value >> (8 * i));
}

inline std::uint64_t get_le(const std::uint8_t* at, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= std::uint64_t{at[i]} << (8 * i);
  return value;
}

inline std::uint32_t crc_of(const std::uint8_t* bytes, std::size_t covered) {
  return static_cast<std::uint32_t>(::crc32(0L, bytes, static_cast<unsigned>(covered)));
}

// Always slot_bytes long (a version-1 record is followed by 64 zero bytes).
inline std::vector<std::uint8_t> encode(const TestRecord& r) {
  std::vector<std::uint8_t> out(slot_bytes, 0);
  std::memcpy(out.data(), "FLRYWM01", 8);
  put_le(out, 8, r.version, 4);
  put_le(out, 16, r.sequence, 8);
  put_le(out, 24, r.watermark_t, 8);
  put_le(out, 32, r.node_id, 4);
  put_le(out, 40, r.layout_fingerprint, 8);
  put_le(out, 48, r.written_unix_ms, 8);
  if (r.v1_format) {
    put_le(out, 60, crc_of(out.data(), 60), 4);
    return out;
  }
  put_le(out, 56, r.layout.epoch_ms, 8);
  put_le(out, 64, r.layout.time_unit_ms, 4);
  out[68] = r.layout.time_bits;
  out[69] = r.layout.node_bits;
  out[70] = r.layout.sequence_bits;
  out[71] = r.layout.core_bits;
  out[72] = r.layout.core_from;
  put_le(out, 124, crc_of(out.data(), 124), 4);
  return out;
}

// nullopt unless the 128 bytes at `at` are a valid slot of either version.
inline std::optional<TestRecord> decode(const std::vector<std::uint8_t>& file, std::uint64_t at) {
  if (file.size() < at + slot_bytes) return std::nullopt;
  const std::uint8_t* p = file.data() + at;
  if (std::memcmp(p, "FLRYWM01", 8) != 0) return std::nullopt;
  TestRecord r;
  if (get_le(p + 124, 4) == crc_of(p, 124)) {
    r.v1_format = false;
  } else if (get_le(p + 60, 4) == crc_of(p, 60)) {
    for (std::size_t i = 64; i < slot_bytes; ++i) {
      if (p[i] != 0) return std::nullopt;
    }
    r.v1_format = true;
  } else {
    return std::nullopt;
  }
  r.version = static_cast<std::uint32_t>(get_le(p + 8, 4));
  r.sequence = get_le(p + 16, 8);
  r.watermark_t = get_le(p + 24, 8);
  r.node_id = static_cast<std::uint32_t>(get_le(p + 32, 4));
  r.layout_fingerprint = get_le(p + 40, 8);
  r.written_unix_ms = get_le(p + 48, 8);
  if (!r.v1_format) {
    r.layout.epoch_ms = get_le(p + 56, 8);
    r.layout.time_unit_ms = static_cast<std::uint32_t>(get_le(p + 64, 4));
    r.layout.time_bits = p[68];
    r.layout.node_bits = p[69];
    r.layout.sequence_bits = p[70];
    r.layout.core_bits = p[71];
    r.layout.core_from = p[72];
  }
  return r;
}

inline bool all_zero(const std::vector<std::uint8_t>& file, std::uint64_t at, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (file.at(at + i) != 0) return false;
  }
  return true;
}

}  // namespace flurry::persist::testing
