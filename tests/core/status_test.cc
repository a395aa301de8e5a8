// tests/core/status_test.cc — Status and Result<T> (core/status.h): ok and failed shapes,
// context, move-only values, and the abort on reading the wrong side.
#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace flurry {
namespace {

Status check_positive(int value) {
  if (value <= 0) return Error{"value " + std::to_string(value) + " is not positive"};
  return {};
}

Result<int> half(int value) {
  if (value % 2 != 0) return Error{"odd"};
  return value / 2;
}

TEST(Status, DefaultIsOkWithNoMessage) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.message(), "");
  EXPECT_TRUE(check_positive(3).ok());
}

TEST(Status, FailedCarriesItsMessage) {
  Status status = check_positive(-2);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "value -2 is not positive");
}

TEST(Status, CarriesTheCodeOfItsError) {
  EXPECT_EQ(Status{}.code(), StatusCode::ok);
  EXPECT_EQ(check_positive(0).code(), StatusCode::failed);
  Status lost = Error{"lease expired", StatusCode::lost};
  EXPECT_EQ(lost.code(), StatusCode::lost);
  EXPECT_EQ(std::move(lost).context("node 3").code(), StatusCode::lost);
  Status not_ok = Error{"an error with code ok", StatusCode::ok};
  EXPECT_FALSE(not_ok.ok()) << "an Error is never ok";
  EXPECT_EQ(not_ok.code(), StatusCode::failed);
  Result<int> result = Error{"etcd down", StatusCode::unavailable};
  EXPECT_EQ(result.code(), StatusCode::unavailable);
  EXPECT_EQ(half(2).code(), StatusCode::ok);
  EXPECT_EQ(name(StatusCode::refused), "refused");
}

TEST(Status, FailedNeverHasAnEmptyMessage) {
  Status status = Error{""};
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(status.message().empty());
}

TEST(Status, ContextPrefixesFailuresOnly) {
  EXPECT_EQ(check_positive(0).context("--lead-ms").message(), "--lead-ms: value 0 is not positive");
  Status ok = check_positive(1).context("--lead-ms");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

TEST(Result, HoldsAValueOrAFailure) {
  Result<int> good = half(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  EXPECT_EQ(good.value(), 4);
  Result<int> bad = half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "odd");
  EXPECT_EQ(std::move(bad).context("half").message(), "half: odd");
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  ASSERT_TRUE(result.ok());
  std::unique_ptr<int> taken = std::move(result).value();
  EXPECT_EQ(*taken, 7);
}

TEST(Result, FromAFailedStatus) {
  Result<std::string> result = check_positive(-1);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "value -1 is not positive");
}

TEST(ResultDeathTest, WrongSideAborts) {
  Result<int> bad = half(1);
  EXPECT_DEATH((void)bad.value(), "value\\(\\) of a failed Result");
  Result<int> good = half(2);
  EXPECT_DEATH((void)good.status(), "status\\(\\) of an ok Result");
  EXPECT_DEATH((void)Result<int>(Status{}), "Result built from an ok Status");
}

}  // namespace
}  // namespace flurry
