// client/flurry_client.cc — the C ABI (flurry_client.h) over flurry::client::Client.
// Every entry point catches everything: no exception crosses into C.
#include "client/flurry_client.h"

#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "client/client.h"

struct flurry_client {
  std::unique_ptr<flurry::client::Client> client;
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

// Runs `body`, turning every exception into an error code: none crosses the C ABI.
template <typename Body>
int guarded(char* err, std::size_t err_len, Body body) {
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
}  // namespace

extern "C" {

flurry_client* flurry_client_create(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                                    char* err, size_t err_len) {
  try {
    flurry::client::Options options;
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
  if (client == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "client is NULL", err, err_len);
  if (out == nullptr) return fail(FLURRY_ERR_INVALID_ARGUMENT, "out is NULL", err, err_len);
  return guarded(err, err_len, [&] {
    flurry::client::Error error;
    const std::optional<std::uint64_t> id = client->client->next(&error);
    if (!id) return fail(error, err, err_len);
    *out = *id;
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
    case FLURRY_ERR_UNKNOWN_SEQUENCE:
      return "unknown_sequence";
    case FLURRY_ERR_NOT_OWNER:
      return "not_owner";
    default:
      return "unknown";
  }
}

}  // extern "C"
