// client/flurry_client.cc — the C ABI (flurry_client.h) over flurry::client::Client.
// Every entry point catches everything (guarded()): no exception crosses into C.
#include "client/flurry_client.h"

#include <array>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "client/client.h"
#include "client/form_keys.h"
#include "client/forms.h"

struct flurry_client {
  std::unique_ptr<flurry::client::Client> client;
};

struct flurry_keys {
  flurry::client::forms::KeyRing ring;
};

namespace {

using flurry::client::ErrorCode;

void write_error(char* err, std::size_t err_len, std::string_view message) {
  if (err == nullptr || err_len == 0) return;
  const std::size_t n = message.size() < err_len - 1 ? message.size() : err_len - 1;
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

int to_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok:
      return FLURRY_OK;
    case ErrorCode::invalid_argument:
      return FLURRY_ERR_INVALID_ARGUMENT;
    case ErrorCode::resolve_failed:
      return FLURRY_ERR_RESOLVE;
    case ErrorCode::system:
      return FLURRY_ERR_SYSTEM;
    case ErrorCode::no_answer:
      return FLURRY_ERR_NO_ANSWER;
    case ErrorCode::fenced:
      return FLURRY_ERR_FENCED;
    case ErrorCode::retry_exhausted:
      return FLURRY_ERR_RETRY_EXHAUSTED;
    case ErrorCode::bad_request:
      return FLURRY_ERR_BAD_REQUEST;
    case ErrorCode::unknown_sequence:
      return FLURRY_ERR_UNKNOWN_SEQUENCE;
    case ErrorCode::not_owner:
      return FLURRY_ERR_NOT_OWNER;
    case ErrorCode::draining:
      return FLURRY_ERR_DRAINING;
    case ErrorCode::exhausted:
      return FLURRY_ERR_EXHAUSTED;
    case ErrorCode::unauthorized:
      return FLURRY_ERR_UNAUTHORIZED;
    case ErrorCode::shutting_down:
      return FLURRY_ERR_SYSTEM;  // only the prefetch thread sees it
  }
  return FLURRY_ERR_SYSTEM;
}

int fail(const flurry::client::Error& error, char* err, std::size_t err_len) {
  write_error(err, err_len, error.message);
  return to_code(error.code);
}

int fail(int code, std::string_view message, char* err, std::size_t err_len) {
  write_error(err, err_len, message);
  return code;
}

// Splits "a,b , c" into trimmed entries; an empty entry is kept (and rejected by create).
std::vector<std::string> split_servers(std::string_view csv) {
  std::vector<std::string> servers;
  for (;;) {
    const std::size_t comma = csv.find(',');
    std::string_view item = csv.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    servers.emplace_back(item);
    if (comma == std::string_view::npos) break;
    csv.remove_prefix(comma + 1);
  }
  return servers;
}

namespace forms = flurry::client::forms;

static_assert(static_cast<int>(forms::Form::dec) == FLURRY_FORM_DEC &&
              static_cast<int>(forms::Form::hex) == FLURRY_FORM_HEX &&
              static_cast<int>(forms::Form::readable) == FLURRY_FORM_READABLE &&
              static_cast<int>(forms::Form::base32) == FLURRY_FORM_BASE32 &&
              static_cast<int>(forms::Form::opaque) == FLURRY_FORM_OPAQUE &&
              static_cast<int>(forms::Form::uuid) == FLURRY_FORM_UUID);

// The C layout as a proto::Layout, checked as flurryd would (clock checks aside).
flurry::Result<forms::ReadableForm> readable_of(const flurry_layout& c) {
  if (c.core_from > 1) return flurry::Error{"core_from must be 0 (sequence) or 1 (node)"};
  flurry::proto::Layout layout;
  layout.time_bits = c.time_bits;
  layout.node_bits = c.node_bits;
  layout.sequence_bits = c.sequence_bits;
  layout.core_bits = c.core_bits;
  layout.core_from = static_cast<flurry::proto::CoreBitsFrom>(c.core_from);
  layout.time_unit_ms = c.time_unit_ms;
  layout.epoch_ms = c.epoch_ms;
  return forms::ReadableForm::create(layout);
}

// Runs `body` (which returns a FLURRY_* code) and turns any exception into one.
template <typename Body>
int guarded(char* err, std::size_t err_len, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(FLURRY_ERR_NO_MEMORY, "out of memory", err, err_len);
  } catch (const std::exception& e) {
    return fail(FLURRY_ERR_SYSTEM, e.what(), err, err_len);
  } catch (...) {
    return fail(FLURRY_ERR_SYSTEM, "unexpected exception", err, err_len);
  }
}

// The FormOptions of a call; fails (INVALID_ARGUMENT) on a layout that is not valid.
int form_options(const flurry_layout* layout, const flurry_keys* keys,
                 std::optional<forms::ReadableForm>& readable, forms::FormOptions& options, char* err,
                 std::size_t err_len) {
  if (layout != nullptr) {
    flurry::Result<forms::ReadableForm> made = readable_of(*layout);
    if (!made.ok()) return fail(FLURRY_ERR_INVALID_ARGUMENT, "layout: " + made.message(), err, err_len);
    readable.emplace(*made);
    options.readable = &*readable;
  }
  if (keys != nullptr) options.keys = &keys->ring;
  return FLURRY_OK;
}

// `text` and a NUL into out[0..out_len), or BUFFER_TOO_SMALL naming `what`.
int copy_text(std::string_view text, char* out, std::size_t out_len, std::string_view what, char* err,
              std::size_t err_len) {
  if (text.size() >= out_len) {
    return fail(FLURRY_ERR_BUFFER_TOO_SMALL,
                std::string(what) + " holds " + std::to_string(out_len) + " bytes; '" + std::string(text) +
                    "' needs " + std::to_string(text.size() + 1),
                err, err_len);
  }
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return FLURRY_OK;
}

flurry_layout to_c_layout(const flurry::proto::Layout& layout) {
  return flurry_layout{layout.time_bits,
                       layout.node_bits,
                       layout.sequence_bits,
                       layout.core_bits,
                       static_cast<uint32_t>(layout.core_from),
                       layout.time_unit_ms,
                       layout.epoch_ms};
}

// INVALID_ARGUMENT when the form lacks what it needs (or is unknown), MALFORMED otherwise.
int form_failure(int form, const forms::FormOptions& options, const std::string& message, char* err,
                 std::size_t err_len) {
  const bool missing =
      ((form == FLURRY_FORM_READABLE || form == FLURRY_FORM_UUID) && options.readable == nullptr) ||
      (form == FLURRY_FORM_OPAQUE && options.keys == nullptr);
  return fail(missing ? FLURRY_ERR_INVALID_ARGUMENT : FLURRY_ERR_MALFORMED, message, err, err_len);
}

// flurry_client_get and flurry_client_get_seq: `fetch` appends ranges of exactly n numbers.
template <typename Fetch>
int get_into(flurry_client* client, uint64_t* out, size_t n, char* err, size_t err_len, Fetch fetch) {
  if (client == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "client is NULL", err, err_len);
  if (n == 0) return FLURRY_OK;
  if (out == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "out is NULL", err, err_len);
  return guarded(err, err_len, [&] {
    std::vector<flurry::proto::Range> ranges;
    flurry::client::Error error;
    if (!fetch(ranges, &error)) return fail(error, err, err_len);
    std::size_t i = 0;
    for (const flurry::proto::Range& range : ranges) {
      for (std::uint32_t k = 0; k < range.count; ++k) out[i++] = range.first + k;
    }
    return FLURRY_OK;
  });
}
// flurry_client_next and flurry_client_next_seq: `next` returns one number or fills the error.
template <typename Next>
int next_into(flurry_client* client, uint64_t* out, char* err, size_t err_len, Next next) {
  if (client == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "client is NULL", err, err_len);
  if (out == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "out is NULL", err, err_len);
  return guarded(err, err_len, [&] {
    flurry::client::Error error;
    const std::optional<std::uint64_t> number = next(&error);
    if (!number) return fail(error, err, err_len);
    *out = *number;
    return FLURRY_OK;
  });
}

// flurry_client_create*: the options, then the client. `key` (may be null) signs requests.
flurry_client* create_client(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                             const flurry::client::Key* key, char* err, size_t err_len,
                             uint32_t poll_us = 0) {
  try {
    flurry::client::Options options;
    options.poll = std::chrono::microseconds{poll_us};
    if (key != nullptr) options.key = *key;
    if (servers_csv != nullptr && servers_csv[0] != '\0') {
      options.servers = split_servers(servers_csv);
      for (const std::string& server : options.servers) {
        if (server.empty()) {
          fail(FLURRY_ERR_INVALID_ARGUMENT,
               std::string("server list '") + servers_csv + "' has an empty entry", err, err_len);
          return nullptr;
        }
      }
    }
    if (timeout_ms != 0) options.timeout = std::chrono::milliseconds{timeout_ms};
    options.prefetch = prefetch;
    flurry::client::Error error;
    auto client = flurry::client::Client::create(options, &error);
    if (!client) {
      fail(error, err, err_len);
      return nullptr;
    }
    return new flurry_client{std::move(client)};
  } catch (const std::bad_alloc&) {
    fail(FLURRY_ERR_NO_MEMORY, "out of memory", err, err_len);
  } catch (const std::exception& e) {
    fail(FLURRY_ERR_SYSTEM, e.what(), err, err_len);
  } catch (...) {
    fail(FLURRY_ERR_SYSTEM, "unexpected exception", err, err_len);
  }
  return nullptr;
}

}  // namespace

extern "C" {

flurry_client* flurry_client_create(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                                    char* err, size_t err_len) {
  return create_client(servers_csv, timeout_ms, prefetch, nullptr, err, err_len);
}

flurry_client* flurry_client_create_signed(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                                           uint32_t key_id, const uint8_t* secret, char* err,
                                           size_t err_len) {
  if (secret == nullptr || key_id == 0) {
    fail(FLURRY_ERR_INVALID_ARGUMENT, "key id 0 or secret NULL", err, err_len);
    return nullptr;
  }
  flurry::client::Key key;
  key.id = key_id;
  std::memcpy(key.secret.data(), secret, key.secret.size());
  return create_client(servers_csv, timeout_ms, prefetch, &key, err, err_len);
}

flurry_client* flurry_client_create_with_key_file(const char* servers_csv, uint32_t timeout_ms,
                                                  uint32_t prefetch, const char* key_file, char* err,
                                                  size_t err_len) {
  if (key_file == nullptr) {
    fail(FLURRY_ERR_INVALID_ARGUMENT, "key_file is NULL", err, err_len);
    return nullptr;
  }
  try {
    flurry::client::Key key;
    flurry::client::Error error;
    if (!flurry::client::read_key_file(key_file, &key, &error)) {
      fail(error, err, err_len);
      return nullptr;
    }
    return create_client(servers_csv, timeout_ms, prefetch, &key, err, err_len);
  } catch (const std::bad_alloc&) {
    fail(FLURRY_ERR_NO_MEMORY, "out of memory", err, err_len);
  }
  return nullptr;
}

flurry_client* flurry_client_create_with_options(const flurry_client_options* options, char* err,
                                                 size_t err_len) {
  if (options == nullptr) {
    fail(FLURRY_ERR_INVALID_ARGUMENT, "options is NULL", err, err_len);
    return nullptr;
  }
  if (options->key_file == nullptr) {
    return create_client(options->servers_csv, options->timeout_ms, options->prefetch, nullptr, err, err_len,
                         options->poll_us);
  }
  try {
    flurry::client::Key key;
    flurry::client::Error error;
    if (!flurry::client::read_key_file(options->key_file, &key, &error)) {
      fail(error, err, err_len);
      return nullptr;
    }
    return create_client(options->servers_csv, options->timeout_ms, options->prefetch, &key, err, err_len,
                         options->poll_us);
  } catch (const std::bad_alloc&) {
    fail(FLURRY_ERR_NO_MEMORY, "out of memory", err, err_len);
  }
  return nullptr;
}

int flurry_client_get(flurry_client* client, uint64_t* out, size_t n, char* err, size_t err_len) {
  return get_into(client, out, n, err, err_len, [&](auto& ranges, flurry::client::Error* error) {
    return client->client->get_ranges(n, ranges, error);
  });
}

int flurry_client_get_seq(flurry_client* client, const char* name, uint64_t* out, size_t n, char* err,
                          size_t err_len) {
  if (name == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "name is NULL", err, err_len);
  return get_into(client, out, n, err, err_len, [&](auto& ranges, flurry::client::Error* error) {
    return client->client->get_seq_ranges(name, n, ranges, error);
  });
}

int flurry_client_next(flurry_client* client, uint64_t* out, char* err, size_t err_len) {
  return next_into(client, out, err, err_len,
                   [&](flurry::client::Error* error) { return client->client->next(error); });
}

int flurry_client_next_seq(flurry_client* client, const char* name, uint64_t* out, char* err,
                           size_t err_len) {
  if (name == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "name is NULL", err, err_len);
  return next_into(client, out, err, err_len,
                   [&](flurry::client::Error* error) { return client->client->next_seq(name, error); });
}

void flurry_layout_default(flurry_layout* out) {
  if (out == nullptr) return;
  *out = to_c_layout(flurry::proto::Layout{});
}

int flurry_client_layout(flurry_client* client, flurry_layout* out, char* err, size_t err_len) {
  if (client == nullptr || out == nullptr) {
    return fail(FLURRY_ERR_INVALID_ARGUMENT, "client or out is NULL", err, err_len);
  }
  return guarded(err, err_len, [&] {
    flurry::client::Error error;
    const std::optional<flurry::proto::Info> info = client->client->info(&error);
    if (!info) return fail(error, err, err_len);
    *out = to_c_layout(flurry::client::to_layout(*info));
    return FLURRY_OK;
  });
}

flurry_keys* flurry_keys_load(const char* path, char* err, size_t err_len) {
  if (path == nullptr) {
    fail(FLURRY_ERR_INVALID_ARGUMENT, "path is NULL", err, err_len);
    return nullptr;
  }
  flurry_keys* keys = nullptr;
  guarded(err, err_len, [&] {
    flurry::Result<forms::KeyRing> ring = forms::KeyRing::load(path);
    if (!ring.ok()) return fail(FLURRY_ERR_KEY_FILE, ring.message(), err, err_len);
    keys = new flurry_keys{std::move(ring).value()};
    return FLURRY_OK;
  });
  return keys;
}

void flurry_keys_destroy(flurry_keys* keys) { delete keys; }

int flurry_id_format(int form, uint64_t id, const flurry_layout* layout, const char* tag,
                     const flurry_keys* keys, char* out, size_t out_len, char* err, size_t err_len) {
  if (form < FLURRY_FORM_DEC || form > FLURRY_FORM_OPAQUE || out == nullptr) {
    return fail(FLURRY_ERR_INVALID_ARGUMENT, "unknown form or out is NULL", err, err_len);
  }
  return guarded(err, err_len, [&] {
    std::optional<forms::ReadableForm> readable;
    forms::FormOptions options;
    if (const int rc = form_options(layout, keys, readable, options, err, err_len); rc != FLURRY_OK)
      return rc;
    options.tag = tag == nullptr ? std::string_view() : std::string_view(tag);
    std::array<char, forms::text_size_max> text{};
    const flurry::Result<std::size_t> n = forms::format_as(static_cast<forms::Form>(form), id, options, text);
    if (!n.ok()) return form_failure(form, options, n.message(), err, err_len);
    return copy_text({text.data(), *n}, out, out_len, "out", err, err_len);
  });
}

int flurry_id_parse(int form, const char* text, const flurry_layout* layout, const flurry_keys* keys,
                    uint64_t* id, int* form_out, char* tag, size_t tag_len, char* err, size_t err_len) {
  if (form < FLURRY_FORM_ANY || form > FLURRY_FORM_OPAQUE || text == nullptr || id == nullptr) {
    return fail(FLURRY_ERR_INVALID_ARGUMENT, "unknown form, or text or id is NULL", err, err_len);
  }
  return guarded(err, err_len, [&] {
    std::optional<forms::ReadableForm> readable;
    forms::FormOptions options;
    if (const int rc = form_options(layout, keys, readable, options, err, err_len); rc != FLURRY_OK)
      return rc;
    const flurry::Result<forms::Parsed> parsed =
        form == FLURRY_FORM_ANY ? forms::parse_any(text, options)
                                : forms::parse_as(static_cast<forms::Form>(form), text, options);
    if (!parsed.ok()) return form_failure(form, options, parsed.message(), err, err_len);
    if (tag != nullptr) {
      const int rc = copy_text(parsed->value.tag_view(), tag, tag_len, "tag", err, err_len);
      if (rc != FLURRY_OK) return rc;
    }
    if (form_out != nullptr) *form_out = static_cast<int>(parsed->form);
    *id = parsed->value.id;
    return FLURRY_OK;
  });
}

void flurry_client_destroy(flurry_client* client) {
  delete client;  // ~Client is noexcept; joining the prefetch thread does not throw here
}

const char* flurry_strerror(int code) {
  switch (code) {
    case FLURRY_OK:
      return "ok";
    case FLURRY_ERR_INVALID_ARGUMENT:
      return "invalid_argument";
    case FLURRY_ERR_RESOLVE:
      return "resolve_failed";
    case FLURRY_ERR_SYSTEM:
      return "system";
    case FLURRY_ERR_NO_ANSWER:
      return "no_answer";
    case FLURRY_ERR_FENCED:
      return "fenced";
    case FLURRY_ERR_RETRY_EXHAUSTED:
      return "retry_exhausted";
    case FLURRY_ERR_BAD_REQUEST:
      return "bad_request";
    case FLURRY_ERR_UNAUTHORIZED:
      return "unauthorized";
    case FLURRY_ERR_NO_MEMORY:
      return "no_memory";
    case FLURRY_ERR_MALFORMED:
      return "malformed";
    case FLURRY_ERR_BUFFER_TOO_SMALL:
      return "buffer_too_small";
    case FLURRY_ERR_KEY_FILE:
      return "key_file";
    case FLURRY_ERR_UNKNOWN_SEQUENCE:
      return "unknown_sequence";
    case FLURRY_ERR_NOT_OWNER:
      return "not_owner";
    default:
      return "unknown";
  }
}

}  // extern "C"
