// tests/pch/test_pch.h — the precompiled header of every GoogleTest source (tests/meson.build:
// the test objects library). Only third-party and standard headers that most tests include:
// parsing them once instead of in each of about sixty sources saves about 3 s of compile a
// source. A test still includes what it uses; this file only makes that cheaper. Never add one
// of flurry's own headers here: a change to it would rebuild every test.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>
