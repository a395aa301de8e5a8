// tests/test_main.cc — the main() of every GoogleTest binary (tests/meson.build: gtest_main_dep).
//
// Exit status: 0 when every selected test ran and passed; 1 when one failed; 77 (meson's SKIP)
// when none failed but one skipped (GTEST_SKIP) or none was selected. GoogleTest's own main
// exits 0 on a skip, so a missing etcd or a blocked io_uring would read as a pass; with 77
// meson records SKIP and scripts/test fails a run that skipped (under CI, any skip).
// Each test() of a GoogleTest binary also declares protocol: 'gtest', so meson asks for the
// JUnit XML from which scripts/test counts the cases one by one.
//
// Single-threaded tests (tests/meson.build single_threaded_tests: left out of the TSan tree):
// outside the sanitizer trees (FLURRY_COUNT_THREADS) every thread the process starts is counted,
// and a binary named in FLURRY_SINGLE_THREADED_TESTS that started one fails, saying so: it
// must leave that list, or TSan would never see its threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#ifdef FLURRY_COUNT_THREADS
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>

namespace {
std::atomic<unsigned> threads_started{0};
}  // namespace

// Interposed (the executable's definition comes before libc's for every caller, std::thread
// included): count, then start the thread with libc's pthread_create.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*),
                              void* argument) noexcept {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  threads_started.fetch_add(1, std::memory_order_relaxed);
  return real(thread, attributes, start, argument);
}
#endif

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

#ifdef FLURRY_COUNT_THREADS
// Whether this binary is one of FLURRY_SINGLE_THREADED_TESTS (comma-separated executable names).
bool listed_single_threaded(const char* argv0) {
  const char* list = std::getenv("FLURRY_SINGLE_THREADED_TESTS");
  if (list == nullptr || argv0 == nullptr) return false;
  std::string_view name(argv0);
  name = name.substr(name.rfind('/') + 1);
  const std::string padded = "," + std::string(list) + ",";
  return padded.find("," + std::string(name) + ",") != std::string::npos;
}
#endif

// 1 (failed) when a listed single-threaded test started a thread; 0 otherwise.
int single_threaded_check(const char* argv0) {
#ifdef FLURRY_COUNT_THREADS
  const unsigned started = threads_started.load();
  if (started > 0 && listed_single_threaded(argv0)) {
    std::fprintf(
        stderr,
        "test_main: %s started %u thread(s) but is listed in tests/meson.build single_threaded_tests "
        "(left out of the TSan tree): take it off that list so TSan checks its threads\n",
        argv0, started);
    return 1;
  }
#else
  (void)argv0;
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  unit.listeners().Append(new SkipReporter);  // owned by GoogleTest
  const int result = RUN_ALL_TESTS();
  if (result != 0) return result;
  if (single_threaded_check(argc > 0 ? argv[0] : nullptr) != 0) return 1;
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
