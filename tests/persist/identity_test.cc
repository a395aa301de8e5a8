// tests/persist/identity_test.cc — load_or_create_instance_id on real files: created once,
// kept across calls, 32 lowercase hex characters, crash-safe (no temporary file left),
// concurrent first calls agree, and a damaged file is refused with a clear message.
#include "persist/identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/persist/test_util.h"

namespace flurry::persist {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::TempDir;

std::string load_ok(const std::string& dir) {
  std::string error;
  const auto id = testing::load_identity(dir, &error);
  EXPECT_TRUE(id.has_value()) << error;
  return id.value_or("");
}

std::string load_error(const std::string& dir) {
  std::string error;
  const auto id = testing::load_identity(dir, &error);
  EXPECT_FALSE(id.has_value()) << "got " << id.value_or("");
  return error;
}

std::string file_text(const std::string& path) {
  const auto bytes = testing::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

TEST(InstanceId, IsCreatedOnceAndKeptAcrossCalls) {
  TempDir tmp;
  const std::string dir = tmp.sub("state/nested");
  const std::string id = load_ok(dir);
  EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(file_text(dir + "/identity"), id + "\n");
  EXPECT_EQ(testing::mode_of(dir), 0700u);
  EXPECT_EQ(testing::mode_of(dir + "/identity"), 0600u);
  EXPECT_EQ(load_ok(dir), id);
  EXPECT_EQ(load_ok(dir), id);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u) << "no temporary file left behind";
}

TEST(InstanceId, DiffersBetweenDirectories) {
  TempDir tmp;
  std::set<std::string> ids;
  for (int i = 0; i < 16; ++i) ids.insert(load_ok(tmp.sub(std::to_string(i))));
  EXPECT_EQ(ids.size(), 16u);
}

TEST(InstanceId, ConcurrentFirstCallsAgree) {
  TempDir tmp;
  const std::string dir = tmp.sub("fresh");
  constexpr int callers = 8;
  std::barrier start(callers);
  std::vector<std::string> ids(callers);
  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      std::string error;
      const auto id = testing::load_identity(dir, &error);
      ids[static_cast<std::size_t>(i)] = id.value_or("error: " + error);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(file_text(dir + "/identity"), ids[0] + "\n");
}

TEST(InstanceId, AcceptsUppercaseAndTrailingWhitespace) {
  TempDir tmp;
  const std::string upper = "0123456789ABCDEF0123456789ABCDEF";
  const auto as_bytes = [](const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
  testing::write_whole(tmp.sub("identity"), as_bytes(upper + "\r\n"));
  EXPECT_EQ(load_ok(tmp.path()), "0123456789abcdef0123456789abcdef");
  testing::write_whole(tmp.sub("identity"), as_bytes(upper));  // no newline
  EXPECT_EQ(load_ok(tmp.path()), "0123456789abcdef0123456789abcdef");
}

TEST(InstanceId, CorruptFileIsRefusedNamingTheFile) {
  TempDir tmp;
  const std::string path = tmp.sub("identity");
  const std::vector<std::string> corrupt = {
      "",
      "\n",
      "0123456789abcdef0123456789abcde\n",    // 31
      "0123456789abcdef0123456789abcdef0\n",  // 33
      "0123456789abcdef0123456789abcdeg\n",   // not hex
      " 0123456789abcdef0123456789abcdef\n",  // leading space
      "0123456789abcdef 0123456789abcdef\n",
      "0123456789abcdef0123456789abcdef\nextra\n",
      std::string(200, 'a'),
      std::string("0123456789abcdef0123456789abcd\0f", 32),
  };
  for (const auto& text : corrupt) {
    SCOPED_TRACE("content \"" + text + "\"");
    testing::write_whole(path, std::vector<std::uint8_t>(text.begin(), text.end()));
    const std::string error = load_error(tmp.path());
    EXPECT_THAT(error, HasSubstr(path));
    EXPECT_THAT(error, HasSubstr("corrupt"));
    EXPECT_THAT(error, HasSubstr("remove it"));
    EXPECT_EQ(file_text(path), text) << "a corrupt identity file is never overwritten";
  }
}

TEST(InstanceId, UnusableDirectoryIsRefused) {
  TempDir tmp;
  testing::write_whole(tmp.sub("file"), {1});
  EXPECT_THAT(load_error(tmp.sub("file")), HasSubstr("not a directory"));
  // A directory where the file goes.
  ASSERT_TRUE(std::filesystem::create_directories(tmp.sub("dir/identity")));
  const std::string error = load_error(tmp.sub("dir"));
  EXPECT_THAT(error, HasSubstr(tmp.sub("dir/identity")));
}

}  // namespace
}  // namespace flurry::persist
