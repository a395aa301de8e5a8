// tests/support/status.h — GoogleTest helpers for core/status.h.
//
//   ASSERT_TRUE(is_ok(store.store(5)));           // prints the message when it failed
//   EXPECT_THAT(failure(store.store(1)), HasSubstr("lower"));  // fails the test when ok
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "base/status.h"

namespace flurry::testing {

inline ::testing::AssertionResult is_ok(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "failed: " << status.message();
}

template <typename T>
::testing::AssertionResult is_ok(const Result<T>& result) {
  if (result.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "failed: " << result.message();
}

// Moves a Result's value into *out when it has one; its status either way, for is_ok():
//   ASSERT_TRUE(is_ok(take(control_request(socket, "lease"), &lease)));
template <typename T>
Status take(Result<T> result, T* out) {
  if (!result.ok()) return std::move(result).status();
  *out = std::move(result).value();
  return {};
}

// The message of a failure; an empty string and a test failure when it succeeded.
inline std::string failure(const Status& status) {
  EXPECT_FALSE(status.ok()) << "expected a failure, got ok";
  return status.message();
}

template <typename T>
std::string failure(const Result<T>& result) {
  EXPECT_FALSE(result.ok()) << "expected a failure, got a value";
  return result.ok() ? std::string() : result.message();
}

}  // namespace flurry::testing
