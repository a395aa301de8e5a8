// base/cli.cc — the one file that compiles CLI11 (base/cli.h says why); every call passes
// straight through, so help, messages and exit codes are CLI11's.
#include "base/cli.h"

#include <CLI/CLI.hpp>

#include <utility>

namespace flurry::cli {

namespace {

CLI::MultiOptionPolicy policy_of(MultiOptionPolicy policy) {
  return policy == MultiOptionPolicy::TakeAll ? CLI::MultiOptionPolicy::TakeAll
                                              : CLI::MultiOptionPolicy::TakeLast;
}

}  // namespace

Validator::Validator(std::function<std::string(std::string&)> check, std::string description)
    : validator_(std::make_shared<const CLI::Validator>(std::move(check), std::move(description))) {}

Validator::Validator(std::shared_ptr<const CLI::Validator> validator) : validator_(std::move(validator)) {}

Validator range_signed(std::int64_t min, std::int64_t max) {
  return Validator(std::make_shared<const CLI::Range>(min, max));
}

Validator range_unsigned(std::uint64_t min, std::uint64_t max) {
  return Validator(std::make_shared<const CLI::Range>(min, max));
}

Validator range_floating(double min, double max) {
  return Validator(std::make_shared<const CLI::Range>(min, max));
}

Validator IsMember(std::vector<std::string> names) {
  return Validator(std::make_shared<const CLI::IsMember>(std::move(names)));
}

Validator IsMember(std::initializer_list<std::uint32_t> values) {
  return Validator(std::make_shared<const CLI::IsMember>(std::vector<std::uint32_t>(values)));
}

ParseError::ParseError(const std::string& what, std::exception_ptr original, bool help, bool version)
    : std::runtime_error(what), original_(std::move(original)), help_(help), version_(version) {}

Option* Option::check(const Validator& validator) {
  option_->check(validator.get());
  return this;
}

Option* Option::required() {
  option_->required();
  return this;
}

Option* Option::excludes(Option* other) {
  option_->excludes(other->option_);
  return this;
}

Option* Option::excludes(const std::string& name) {
  option_->excludes(name);
  return this;
}

Option* Option::capture_default_str() {
  option_->capture_default_str();
  return this;
}

Option* Option::default_str(std::string text) {
  option_->default_str(std::move(text));
  return this;
}

Option* Option::delimiter(char separator) {
  option_->delimiter(separator);
  return this;
}

Option* Option::multi_option_policy(MultiOptionPolicy policy) {
  option_->multi_option_policy(policy_of(policy));
  return this;
}

std::string Option::get_default_str() const { return option_->get_default_str(); }

std::string Option::get_description() const { return option_->get_description(); }

std::size_t Option::count() const { return option_->count(); }

OptionDefaults* OptionDefaults::always_capture_default() {
  defaults_->always_capture_default();
  return this;
}

OptionDefaults* OptionDefaults::multi_option_policy(MultiOptionPolicy policy) {
  defaults_->multi_option_policy(policy_of(policy));
  return this;
}

App::App(std::string description, std::string name)
    : owned_(std::make_unique<CLI::App>(std::move(description), std::move(name))), app_(owned_.get()) {}

App::App(CLI::App* subcommand) : app_(subcommand) {}

App::~App() = default;

namespace {

template <typename T>
Option* add(CLI::App* app, std::vector<std::unique_ptr<Option>>* options, std::string name, T& value,
            std::string help) {
  options->push_back(std::make_unique<Option>(app->add_option(std::move(name), value, std::move(help))));
  return options->back().get();
}

}  // namespace

Option* App::add_option(std::string name, std::string& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, std::vector<std::string>& values, std::string help) {
  return add(app_, &options_, std::move(name), values, std::move(help));
}
Option* App::add_option(std::string name, std::uint16_t& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, std::uint32_t& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, std::uint64_t& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, std::int64_t& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, double& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}
Option* App::add_option(std::string name, std::optional<std::uint32_t>& value, std::string help) {
  return add(app_, &options_, std::move(name), value, std::move(help));
}

Option* App::add_option_function(std::string name, std::function<void(const std::string&)> read,
                                 std::string help) {
  auto through = [read = std::move(read)](const std::string& text) {
    try {
      read(text);
    } catch (const ValidationError& refused) {
      throw CLI::ValidationError(refused.what());
    }
  };
  options_.push_back(std::make_unique<Option>(
      app_->add_option_function<std::string>(std::move(name), through, std::move(help))));
  return options_.back().get();
}

Option* App::add_flag(std::string name, bool& value, std::string help) {
  options_.push_back(std::make_unique<Option>(app_->add_flag(std::move(name), value, std::move(help))));
  return options_.back().get();
}

Option* App::set_version_flag(std::string name, std::string version) {
  options_.push_back(std::make_unique<Option>(app_->set_version_flag(std::move(name), version)));
  return options_.back().get();
}

OptionDefaults* App::option_defaults() {
  if (!defaults_) defaults_ = std::make_unique<OptionDefaults>(app_->option_defaults());
  return defaults_.get();
}

App* App::footer(std::string text) {
  app_->footer(std::move(text));
  return this;
}

App* App::failure_message(std::function<std::string(const std::string& what)> message) {
  app_->failure_message([message = std::move(message)](const CLI::App*, const CLI::Error& error) {
    return message(error.what());
  });
  return this;
}

App* App::add_subcommand(std::string name, std::string description) {
  subcommands_.push_back(
      std::unique_ptr<App>(new App(app_->add_subcommand(std::move(name), std::move(description)))));
  return subcommands_.back().get();
}

App* App::require_subcommand(int count) {
  app_->require_subcommand(count);
  return this;
}

void App::parse(int argc, const char* const* argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    throw ParseError(error.what(), std::current_exception(),
                     dynamic_cast<const CLI::CallForHelp*>(&error) != nullptr,
                     dynamic_cast<const CLI::CallForVersion*>(&error) != nullptr);
  }
}

int App::exit(const ParseError& error) const {
  try {
    std::rethrow_exception(error.original());
  } catch (const CLI::ParseError& original) {
    return app_->exit(original);
  }
}

std::string App::help() const { return app_->help(); }

App::operator bool() const { return static_cast<bool>(*app_); }

}  // namespace flurry::cli
