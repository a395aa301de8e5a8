// tests/test_main.cc — the main() of every GoogleTest binary (tests/meson.build: gtest_main_dep).
//
// Exit status: 0 when every selected test ran and passed; 1 when one failed; 77 (meson's SKIP)
// when none failed but one skipped (GTEST_SKIP) or none was selected. GoogleTest's own main
// exits 0 on a skip, so a missing etcd or a blocked io_uring would read as a pass; with 77
// meson records SKIP and scripts/test fails a run that skipped (under CI, any skip).
// Each test() of a GoogleTest binary also declares protocol: 'gtest', so meson asks for the
// JUnit XML from which scripts/test counts the cases one by one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

namespace {

constexpr int exit_skipped = 77;  // GNU / meson convention

// Names every skipped test on stderr, so the log says what did not run and why to look.
class SkipReporter : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result() != nullptr && info.result()->Skipped()) {
      std::fprintf(stderr, "test_main: SKIPPED %s.%s\n", info.test_suite_name(), info.name());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  unit.listeners().Append(new SkipReporter);  // owned by GoogleTest
  const int result = RUN_ALL_TESTS();
  if (result != 0) return result;
  if (GTEST_FLAG_GET(list_tests)) return 0;
  if (unit.test_to_run_count() == 0) {
    std::fprintf(stderr, "test_main: no test selected (check --gtest_filter); reported as skipped\n");
    return exit_skipped;
  }
  if (unit.skipped_test_count() > 0) {
    std::fprintf(stderr, "test_main: %d test(s) skipped, none failed: exit %d (skipped)\n",
                 unit.skipped_test_count(), exit_skipped);
    return exit_skipped;
  }
  return 0;
}
