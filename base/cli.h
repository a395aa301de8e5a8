// base/cli.h — the command-line parser of flurry's programs: the part of CLI11 they use, behind
// standard headers only. base/cli.cc is the one file that includes <CLI/CLI.hpp>: CLI11 2.1.2
// (Debian 12) is header-only and defines its validators as namespace-scope objects, so every
// file that includes it compiles about 1,800 functions (about 10 s of g++ -O2 each); through
// this facade a build tree compiles them once, not once per program. Help, error messages and
// exit codes are CLI11's own, unchanged: each call passes straight through.
//
// The spelling is CLI11's (App, Option, Range, IsMember, add_option, ->check(...)), so a
// program reads as a CLI11 program. add_option has one overload per value type in use; another
// type is a compile error here, added by one line in each file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
class Option;
class OptionDefaults;
class Validator;
}  // namespace CLI

namespace flurry::cli {

static_assert(std::is_same_v<unsigned, std::uint32_t> && std::is_same_v<std::size_t, std::uint64_t>,
              "add_option's overloads assume LP64: unsigned is uint32_t, size_t is uint64_t");

enum class MultiOptionPolicy { TakeLast, TakeAll };

// A check of an option's text before it is stored: a range, a set, or a function that returns
// "" or what is wrong (it may rewrite the text). `description` is what --help shows for the
// value (HOST:PORT, TAG). Cheap to copy.
class Validator {
 public:
  Validator(std::function<std::string(std::string&)> check, std::string description);
  explicit Validator(std::shared_ptr<const CLI::Validator> validator);
  const CLI::Validator& get() const { return *validator_; }

 private:
  std::shared_ptr<const CLI::Validator> validator_;
};

// CLI11's Range: "INT", "UINT" or "FLOAT in [min - max]" in the help, by T's kind.
Validator range_signed(std::int64_t min, std::int64_t max);
Validator range_unsigned(std::uint64_t min, std::uint64_t max);
Validator range_floating(double min, double max);
template <typename T>
Validator Range(T min, T max) {
  static_assert(std::is_arithmetic_v<T>);
  if constexpr (std::is_floating_point_v<T>) {
    return range_floating(min, max);
  } else if constexpr (std::is_signed_v<T>) {
    return range_signed(min, max);
  } else {
    return range_unsigned(min, max);
  }
}

// CLI11's IsMember. The numbers' one takes an initializer_list: a vector<uint32_t> beside the
// vector<string> would make {"a", "b"} ambiguous (vector's constructor from two iterators).
Validator IsMember(std::vector<std::string> names);
Validator IsMember(std::initializer_list<std::uint32_t> values);

// Thrown by an add_option_function callback: the option's value is refused with this message.
class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failed parse, or --help / --version (CLI11 reports those as errors too). App::exit prints
// what CLI11 prints for it and returns CLI11's exit code.
class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& what, std::exception_ptr original, bool help, bool version);
  bool help_requested() const { return help_; }
  bool version_requested() const { return version_; }
  const std::exception_ptr& original() const { return original_; }

 private:
  std::exception_ptr original_;
  bool help_ = false;
  bool version_ = false;
};

// One option of an App, which owns it: the pointer stays valid as long as the App.
class Option {
 public:
  explicit Option(CLI::Option* option) : option_(option) {}
  Option* check(const Validator& validator);
  Option* required();
  Option* excludes(Option* other);
  Option* excludes(const std::string& name);
  Option* capture_default_str();
  Option* default_str(std::string text);
  Option* delimiter(char separator);
  Option* multi_option_policy(MultiOptionPolicy policy);
  std::string get_default_str() const;
  std::string get_description() const;
  std::size_t count() const;  // how often it was given

 private:
  CLI::Option* option_;
};

// What every option added later starts with.
class OptionDefaults {
 public:
  explicit OptionDefaults(CLI::OptionDefaults* defaults) : defaults_(defaults) {}
  OptionDefaults* always_capture_default();
  OptionDefaults* multi_option_policy(MultiOptionPolicy policy);

 private:
  CLI::OptionDefaults* defaults_;
};

class App {
 public:
  explicit App(std::string description = "", std::string name = "");
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  Option* add_option(std::string name, std::string& value, std::string help = "");
  Option* add_option(std::string name, std::vector<std::string>& values, std::string help = "");
  Option* add_option(std::string name, std::uint16_t& value, std::string help = "");
  Option* add_option(std::string name, std::uint32_t& value, std::string help = "");
  Option* add_option(std::string name, std::uint64_t& value, std::string help = "");
  Option* add_option(std::string name, std::int64_t& value, std::string help = "");
  Option* add_option(std::string name, double& value, std::string help = "");
  Option* add_option(std::string name, std::optional<std::uint32_t>& value, std::string help = "");
  // Calls `read` with the option's text as it is parsed; a cli::ValidationError it throws
  // refuses the value with its message.
  Option* add_option_function(std::string name, std::function<void(const std::string&)> read,
                              std::string help = "");
  Option* add_flag(std::string name, bool& value, std::string help = "");  // "-v,--verbose", "!--no-x"
  Option* set_version_flag(std::string name, std::string version);
  OptionDefaults* option_defaults();
  App* footer(std::string text);
  // The text printed for a failed parse (not for --help or --version), from CLI11's message.
  App* failure_message(std::function<std::string(const std::string& what)> message);
  App* add_subcommand(std::string name, std::string description = "");
  App* require_subcommand(int count);

  void parse(int argc, const char* const* argv);  // throws ParseError
  int exit(const ParseError& error) const;        // prints as CLI11 does; CLI11's exit code
  std::string help() const;
  explicit operator bool() const;  // a subcommand: it was given

 private:
  explicit App(CLI::App* subcommand);

  std::unique_ptr<CLI::App> owned_;
  CLI::App* app_;
  std::unique_ptr<OptionDefaults> defaults_;
  std::vector<std::unique_ptr<Option>> options_;
  std::vector<std::unique_ptr<App>> subcommands_;
};

}  // namespace flurry::cli
