// tests/client/forms_fuzz.cc — libFuzzer target for the ID forms' parsers
// (CONTRIBUTING.md, untrusted input): every
// input is one text, read by parse_any and by parse_as in each form, with the snowflake layout
// and a one-key ring. Built only with clang (-fsanitize=fuzzer,address,undefined). Run:
//   build-fuzz/tests/client/forms_fuzz -max_total_time=60
// Any broken invariant aborts, which libFuzzer reports as a crash:
//   * a text that a form reads is that form's spelling of the ID it read: writing the ID back
//     in the form (with the tag read) gives the text again, up to the upper case and aliases
//     that base32 and opaque accept and the leading zeros that hex and dec may drop;
//   * parse_any reads a text only as a form that parse_as also reads it as, to the same ID;
//   * every ID read is below 2^63, and a readable one fits the layout.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "client/form_keys.h"
#include "client/forms.h"

namespace {

namespace forms = flurry::client::forms;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "forms_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

struct Setup {
  forms::ReadableForm readable = *forms::ReadableForm::create(flurry::proto::Layout{});
  forms::KeyRing keys = *forms::KeyRing::parse(
      "[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", "fuzz keys");
  forms::FormOptions options{&readable, {}, &keys};
};

// Upper case with base32's aliases, the key id of an opaque text lower case.
std::string canonical(forms::Form form, std::string_view text) {
  std::string out(text);
  const std::size_t from = form == forms::Form::opaque ? out.find('_') + 1 : 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    if (i < from) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      continue;
    }
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c == 'I' || c == 'L') c = '1';
    if (c == 'O') c = '0';
  }
  return out;
}

void check_spelling(const Setup& setup, const forms::Parsed& parsed, std::string_view text) {
  check(parsed.value.id <= forms::id_max, "an ID of 2^63 or more was read");
  forms::FormOptions options = setup.options;
  options.tag = parsed.value.tag_view();
  std::array<char, forms::text_size_max> out{};
  const flurry::Result<std::size_t> n = forms::format_as(parsed.form, parsed.value.id, options, out);
  check(n.ok(), "an ID that was read cannot be written back");
  const std::string_view written(out.data(), *n);
  if (parsed.form == forms::Form::dec || parsed.form == forms::Form::hex) {
    // Leading zeros may be dropped; the value was compared by the caller's round trip.
    const flurry::Result<forms::Parsed> again = forms::parse_as(parsed.form, written, options);
    check(again.ok() && again->value.id == parsed.value.id, "dec or hex does not read back");
    return;
  }
  const std::string expected =
      parsed.form == forms::Form::readable ? std::string(text) : canonical(parsed.form, text);
  check(written == expected, "a text read is not the form's spelling of its ID");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Setup setup;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (forms::Form form : {forms::Form::dec, forms::Form::hex, forms::Form::readable, forms::Form::base32,
                           forms::Form::opaque}) {
    const flurry::Result<forms::Parsed> parsed = forms::parse_as(form, text, setup.options);
    if (parsed.ok()) check_spelling(setup, *parsed, text);
  }
  const flurry::Result<forms::Parsed> any = forms::parse_any(text, setup.options);
  if (any.ok()) {
    const flurry::Result<forms::Parsed> same = forms::parse_as(any->form, text, setup.options);
    check(same.ok() && same->value.id == any->value.id, "parse_any and parse_as disagree");
  }
  return 0;
}
