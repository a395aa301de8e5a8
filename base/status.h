// base/status.h — the one error type of flurry, for everything off the hot path.
//
// Contract:
//   * Status is ok, or failed with a code and a message: one sentence for a person saying
//     what failed and, when known, how to fix it ("--lead-ms 0 is below 1; pass 1..60000").
//     A failed Status always has a non-empty message; an ok Status has none. The code is for
//     callers that act on the kind of failure (retry, degrade, give up); most never look.
//   * Result<T> is a T, or a failed Status. Reading the value of a failed Result (or the
//     error of an ok one) is a programming error and aborts (FLURRY_INVARIANT): check ok()
//     first.
//   * Build failures with `return Error{"..."};` or `return Error{"...", StatusCode::lost};`
//     (converts to Status and to any Result<T>), successes with `return {};` (Status) or
//     `return value;` (Result<T>).
//   * Both are [[nodiscard]]: an ignored error is a compile error under -Werror.
//   * Header-only and standard-library-only, so every folder may include it (persist/ and
//     client/ included); it is the single exception to the include arrows (CONTRIBUTING.md).
// The hot path (handler, workers) answers with wire statuses and counters, never with these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/invariant.h"

namespace flurry {

// The kinds of failure callers act on. Add one only when some caller branches on it.
enum class StatusCode : std::uint8_t {
  ok = 0,
  failed,       // anything else; the message says what
  unavailable,  // a dependency did not answer in time (etcd, a disk write): retrying may work
  refused,      // will not work by retrying alone (configuration, clock skew, layout, a rule
                // of the store): the message says what to fix
  not_found,    // the thing asked for does not exist
  lost,         // ownership is gone (the node id's lease expired or was taken): stop issuing
};

constexpr std::string_view name(StatusCode code) {
  switch (code) {
    case StatusCode::ok:
      return "ok";
    case StatusCode::failed:
      return "failed";
    case StatusCode::unavailable:
      return "unavailable";
    case StatusCode::refused:
      return "refused";
    case StatusCode::not_found:
      return "not_found";
    case StatusCode::lost:
      return "lost";
  }
  return "unknown";
}

// A failure on its way to a Status or a Result<T>.
struct Error {
  std::string message;
  StatusCode code = StatusCode::failed;
};

class [[nodiscard]] Status {
 public:
  Status() = default;                                                            // ok
  Status(Error error) : message_(std::move(error.message)), code_(error.code) {  // NOLINT: implicit
    if (code_ == StatusCode::ok) code_ = StatusCode::failed;
    if (message_.empty()) message_ = "unknown error";
  }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  // The sentence for a person; empty when ok.
  const std::string& message() const { return message_; }

  // "CONTEXT: message" for a failed Status (say where it failed); ok stays ok.
  Status context(std::string_view where) && {
    if (!ok()) message_ = std::string(where) + ": " + message_;
    return std::move(*this);
  }

 private:
  std::string message_;
  StatusCode code_ = StatusCode::ok;
};

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<T, Status> && !std::is_same_v<T, Error>, "Result of an error");
  static_assert(!std::is_reference_v<T>, "Result holds values");

 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}              // NOLINT: implicit
  Result(Error error) : state_(std::in_place_index<1>, Status(std::move(error))) {}  // NOLINT
  // A failed Status only: a Result cannot be ok without a value.
  Result(Status status) : state_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    FLURRY_INVARIANT(!std::get<1>(state_).ok(), "Result built from an ok Status");
  }

  bool ok() const { return state_.index() == 0; }

  T& value() & {
    check_value();
    return std::get<0>(state_);
  }
  const T& value() const& {
    check_value();
    return std::get<0>(state_);
  }
  T&& value() && {
    check_value();
    return std::move(std::get<0>(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The failure; aborts when ok.
  const Status& status() const& {
    FLURRY_INVARIANT(!ok(), "status() of an ok Result");
    return std::get<1>(state_);
  }
  Status status() && {
    FLURRY_INVARIANT(!ok(), "status() of an ok Result");
    return std::move(std::get<1>(state_));
  }
  const std::string& message() const { return status().message(); }
  StatusCode code() const { return ok() ? StatusCode::ok : std::get<1>(state_).code(); }

  // "CONTEXT: message" for a failure; a value stays as it is.
  Result context(std::string_view where) && {
    if (!ok()) return std::move(std::get<1>(state_)).context(where);
    return std::move(*this);
  }

 private:
  void check_value() const { FLURRY_INVARIANT(ok(), "value() of a failed Result"); }
  std::variant<T, Status> state_;
};

}  // namespace flurry
