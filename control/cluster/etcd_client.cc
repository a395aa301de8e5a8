// control/cluster/etcd_client.cc — see etcd_client.h.
#include "control/cluster/etcd_client.h"

#include <curl/curl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "control/private_file.h"

namespace flurry::control::cluster {
namespace {

using nlohmann::json;

constexpr std::size_t answer_size_max = 4U << 20;  // a bounded answer; ours are tiny

constexpr std::string_view base64_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// gRPC status codes that the gateway puts in "code".
constexpr int grpc_deadline_exceeded = 4;
constexpr int grpc_not_found = 5;
constexpr int grpc_permission_denied = 7;
constexpr int grpc_unavailable = 14;
constexpr int grpc_unauthenticated = 16;

bool is_https(std::string_view url) { return url.substr(0, 8) == "https://"; }

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// etcd refused the token (or wants one) before doing anything with the request: expired after
// --auth-token-ttl without use, forgotten by a restarted etcd (simple tokens live in its
// memory), issued before the users or roles changed, or none sent because auth was off then.
bool token_refused(int grpc_code, std::string_view message) {
  return grpc_code == grpc_unauthenticated || contains(message, "invalid auth token") ||
         contains(message, "revision of auth store is old") || contains(message, "user name is empty");
}

// At most `size_max` bytes of an answer that is not JSON, printable ASCII only, for a message.
std::string printable_excerpt(std::string_view text, std::size_t size_max = 200) {
  std::string out;
  for (const char c : text.substr(0, size_max)) out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// A token goes into a header line: printable ASCII without spaces, bounded.
bool usable_token(std::string_view token) {
  return !token.empty() && token.size() <= 1024 &&
         std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// Overwrites a string that held the password before it is freed (best effort: no copy of it
// is meant to outlive the authentication request).
void wipe(std::string& secret) {
  std::fill(secret.begin(), secret.end(), '\0');
  secret.clear();
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  const std::size_t n = size * count;
  if (body->size() + n > answer_size_max) return 0;  // makes curl fail with a write error
  body->append(data, n);
  return n;
}

// int64 fields come as JSON strings; tolerate numbers too.
std::int64_t as_int64(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& text = it->get_ref<const std::string&>();
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::string prefix_end(std::string prefix) {
  // etcd's range_end for "every key with this prefix": the prefix with its last byte + 1.
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

json op_to_json(const Op& op) {
  switch (op.kind) {
    case Op::Kind::put: {
      json put = {{"key", base64_encode(op.key)}, {"value", base64_encode(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return json{{"request_put", std::move(put)}};
    }
    case Op::Kind::get:
      return json{{"request_range", {{"key", base64_encode(op.key)}}}};
    case Op::Kind::get_prefix:
      return json{{"request_range",
                   {{"key", base64_encode(op.key)}, {"range_end", base64_encode(prefix_end(op.key))}}}};
    case Op::Kind::del:
      return json{{"request_delete_range", {{"key", base64_encode(op.key)}}}};
  }
  return json::object();
}

json compare_to_json(const Compare& compare) {
  json c = {{"key", base64_encode(compare.key)}, {"result", "EQUAL"}};
  switch (compare.target) {
    case Compare::Target::create_revision:
      c["target"] = "CREATE";
      c["create_revision"] = std::to_string(compare.number);
      break;
    case Compare::Target::mod_revision:
      c["target"] = "MOD";
      c["mod_revision"] = std::to_string(compare.number);
      break;
    case Compare::Target::value:
      c["target"] = "VALUE";
      c["value"] = base64_encode(compare.value);
      break;
    case Compare::Target::lease:
      c["target"] = "LEASE";
      c["lease"] = std::to_string(compare.number);
      break;
  }
  return c;
}

bool kvs_from_json(const json& range, std::vector<KeyValue>* out) {
  const auto it = range.find("kvs");
  if (it == range.end()) return true;
  if (!it->is_array()) return false;
  for (const json& item : *it) {
    KeyValue kv;
    auto key = base64_decode(item.value("key", std::string()));
    auto value = base64_decode(item.value("value", std::string()));
    if (!key || !value) return false;
    kv.key = std::move(*key);
    kv.value = std::move(*value);
    kv.create_revision = as_int64(item, "create_revision");
    kv.mod_revision = as_int64(item, "mod_revision");
    kv.lease = as_int64(item, "lease");
    out->push_back(std::move(kv));
  }
  return true;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                            std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += base64_alphabet[(v >> 18) & 63];
    out += base64_alphabet[(v >> 12) & 63];
    out += base64_alphabet[(v >> 6) & 63];
    out += base64_alphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) v |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out += base64_alphabet[(v >> 18) & 63];
    out += base64_alphabet[(v >> 12) & 63];
    out += rest == 2 ? base64_alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int, 256> table;
  table.fill(-1);
  for (std::size_t i = 0; i < base64_alphabet.size(); ++i) {
    table[static_cast<unsigned char>(base64_alphabet[i])] = static_cast<int>(i);
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int pad = 0;
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=') {
        // '=' only in the last group, only in its last two places, and only trailing.
        if (i + 4 != text.size() || j < 2) return std::nullopt;
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad > 0) return std::nullopt;
      const int d = table[static_cast<unsigned char>(c)];
      if (d < 0) return std::nullopt;
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

Result<std::vector<std::string>> parse_endpoints(std::string_view list) {
  std::vector<std::string> endpoints;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && item.back() == '/') item.remove_suffix(1);
    const std::string_view scheme = is_https(item) ? "https://" : "http://";
    const std::size_t colon = item.rfind(':');
    if (item.substr(0, scheme.size()) != scheme || colon == std::string_view::npos ||
        colon < scheme.size() + 1 || colon + 1 == item.size()) {
      return Error{"etcd endpoint '" + std::string(item) +
                   "' is not of the form http://HOST:PORT or https://HOST:PORT (list them as URL,URL,URL)"};
    }
    unsigned port = 0;
    const std::string_view port_text = item.substr(colon + 1);
    const auto parsed = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (parsed.ec != std::errc() || parsed.ptr != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return Error{"etcd endpoint '" + std::string(item) + "' has no valid port (1..65535)"};
    }
    endpoints.emplace_back(item);
    if (endpoints.size() > 16) {
      return Error{"more than 16 etcd endpoints given; list at most 16"};
    }
  }
  if (endpoints.empty()) {
    return Error{"no etcd endpoint given: pass --etcd http://HOST:PORT[,http://HOST:PORT]"};
  }
  return endpoints;
}

Result<std::string> read_password_file(const std::string& path) {
  Result<std::string> text = control::read_private_file(
      path, control::PrivateFile{"etcd password file", "--etcd-password-file", "the password", 1024});
  if (!text.ok()) return text.status();
  std::string password = std::move(text).value();
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) {
    return Error{"etcd password file " + path + " is empty: write the etcd user's password in it"};
  }
  if (password.find_first_of("\r\n") != std::string::npos) {
    wipe(password);
    return Error{"etcd password file " + path +
                 " has more than one line: the whole file, without its last line break, is the password"};
  }
  return password;
}

namespace {

// A TLS file given by flag: there and readable now (curl reads it again at each connection).
Status check_readable(const char* flag, const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0 || access(path.c_str(), R_OK) != 0) {
    return Error{std::string(flag) + " " + path + ": " + std::strerror(errno)};
  }
  if (!S_ISREG(info.st_mode)) return Error{std::string(flag) + " " + path + " is not a regular file"};
  return {};
}

}  // namespace

Status check_config(const EtcdConfig& config) {
  if (config.endpoints.empty()) {
    return Error{"no etcd endpoint given: pass --etcd http://HOST:PORT[,http://HOST:PORT]"};
  }
  const auto tls_endpoints = static_cast<std::size_t>(std::count_if(
      config.endpoints.begin(), config.endpoints.end(), [](const auto& e) { return is_https(e); }));
  if (tls_endpoints != 0 && tls_endpoints != config.endpoints.size()) {
    return Error{"--etcd mixes http:// and https:// endpoints: give every member as https://HOST:PORT"};
  }
  const bool tls = tls_endpoints != 0;
  if (!tls && (!config.ca_file.empty() || !config.cert_file.empty() || !config.key_file.empty())) {
    return Error{
        "--etcd-cacert, --etcd-cert and --etcd-key are for https:// endpoints, but --etcd gives http:// "
        "ones: "
        "write them as https://HOST:PORT (or drop the TLS flags)"};
  }
  if (config.cert_file.empty() != config.key_file.empty()) {
    return Error{config.cert_file.empty()
                     ? "--etcd-key needs --etcd-cert FILE (the client certificate the key belongs to)"
                     : "--etcd-cert needs --etcd-key FILE (the client certificate's private key)"};
  }
  if (config.user.empty() != config.password_file.empty()) {
    return Error{config.user.empty()
                     ? "--etcd-password-file needs --etcd-user NAME (the etcd user it is for)"
                     : "--etcd-user needs --etcd-password-file FILE (mode 0600, the password in "
                       "it; never on the command line)"};
  }
  const std::pair<const char*, const std::string*> files[] = {{"--etcd-cacert", &config.ca_file},
                                                              {"--etcd-cert", &config.cert_file},
                                                              {"--etcd-key", &config.key_file}};
  for (const auto& [flag, path] : files) {
    if (path->empty()) continue;
    if (Status readable = check_readable(flag, *path); !readable.ok()) return readable;
  }
  if (tls) {
    const curl_version_info_data* curl = curl_version_info(CURLVERSION_NOW);
    if ((curl->features & CURL_VERSION_SSL) == 0) {
      return Error{"this libcurl has no TLS support: https:// etcd endpoints cannot be used"};
    }
    const bool default_ca = (curl->cainfo != nullptr && access(curl->cainfo, R_OK) == 0) ||
                            (curl->capath != nullptr && access(curl->capath, R_OK | X_OK) == 0);
    if (config.ca_file.empty() && !default_ca) {
      return Error{
          "https:// etcd endpoints without --etcd-cacert, and libcurl has no default CA bundle to verify "
          "etcd's "
          "certificate with: give --etcd-cacert FILE (the CA that signed etcd's certificate)"};
    }
  }
  if (!config.password_file.empty()) {
    Result<std::string> password = read_password_file(config.password_file);
    if (!password.ok()) return password.status();
    wipe(*password);
  }
  return {};
}

struct EtcdClient::Impl {
  struct Endpoint {
    std::string url;
    CURL* handle = nullptr;
  };
  EtcdConfig config;
  std::vector<Endpoint> endpoints;
  std::size_t current = 0;
  curl_slist* headers = nullptr;
  std::string body;
  std::array<char, CURL_ERROR_SIZE> curl_error{};
  std::shared_ptr<EtcdSession> session;  // the token and its counters, maybe shared
  // This thread's copy of the session's token (what the headers carry) and its generation.
  std::string token;
  std::uint64_t token_generation = 0;
  bool server_auth_off = false;
  bool token_refused_last = false;  // the last answer refused the token (or wanted one)
  bool answered_last = false;       // the last exchange got an HTTP answer
  // etcd refused this thread's token and the authentication after it failed (etcd slow or
  // away, the password file unreadable): the next one is still a re-authentication.
  bool refusal_unrenewed = false;

  ~Impl() {
    for (Endpoint& e : endpoints) {
      if (e.handle != nullptr) curl_easy_cleanup(e.handle);
    }
    if (headers != nullptr) curl_slist_free_all(headers);
  }

  bool wants_auth() const { return !config.user.empty(); }

  // Content-Type, and Authorization with the token when there is one, on every handle.
  Status set_headers() {
    curl_slist* fresh = curl_slist_append(nullptr, "Content-Type: application/json");
    if (fresh != nullptr && !token.empty()) {
      curl_slist* with_token = curl_slist_append(fresh, ("Authorization: " + token).c_str());
      if (with_token == nullptr) {
        curl_slist_free_all(fresh);
        fresh = nullptr;
      }
    }
    if (fresh == nullptr) return Error{"libcurl could not make a header list"};
    for (Endpoint& e : endpoints) curl_easy_setopt(e.handle, CURLOPT_HTTPHEADER, fresh);
    if (headers != nullptr) curl_slist_free_all(headers);
    headers = fresh;
    return {};
  }

  // POSTs `request` to `path` on one endpoint after another until one answers. Returns the
  // parsed answer; fails not_found for a gRPC NotFound answer, failed for other error
  // answers and for what the local configuration decides, unavailable when no endpoint
  // answered usefully.
  Result<json> call(const char* path, const json& request, std::uint64_t* failovers) {
    const std::string payload = request.dump();
    std::string last_error;
    for (std::size_t attempt = 0; attempt < endpoints.size(); ++attempt) {
      if (attempt > 0) {
        current = (current + 1) % endpoints.size();
        ++*failovers;
      }
      Result<json> answer = authorized_exchange(endpoints[current], path, payload);
      if (answer.code() == StatusCode::unavailable) {
        last_error = answer.message();  // this endpoint cannot serve now: try the next
        continue;
      }
      return answer;
    }
    return Error{"etcd unreachable (" + last_error + ")", StatusCode::unavailable};
  }

  // One request on one endpoint as the configured user: gets a token first when the session
  // has none, and a new one when etcd refuses it, then repeats the request (etcd refused it
  // before doing anything, so it cannot be applied twice).
  Result<json> authorized_exchange(Endpoint& e, const char* path, const std::string& payload) {
    if (wants_auth()) {
      if (Status synced = take_session_token(); !synced.ok()) return synced;
      if (token.empty() && !server_auth_off) {
        if (Status renewed = renew_token(e, /*refused=*/false); !renewed.ok()) return renewed;
      }
    }
    Result<json> answer = exchange(e, path, payload, config.request_timeout_ms);
    if (!token_refused_last) return answer;
    if (!wants_auth()) {
      return Error{answer.message() +
                   ": etcd has authentication enabled: give --etcd-user NAME and --etcd-password-file FILE"};
    }
    if (Status renewed = renew_token(e, /*refused=*/true); !renewed.ok()) return renewed;
    return exchange(e, path, payload, config.request_timeout_ms);
  }

  // The session's token, if another client changed it since this one looked. Lock-free when
  // it did not, so a client never waits on another's authentication with a token in hand.
  Status take_session_token() {
    if (session->generation.load(std::memory_order_acquire) == token_generation) return {};
    std::unique_lock lock(session->mutex);
    return adopt_locked(lock);
  }

  Status adopt_locked(std::unique_lock<std::mutex>& lock) {
    token = session->token;
    token_generation = session->generation;
    server_auth_off = session->server_auth_off;
    lock.unlock();
    return set_headers();
  }

  // A token for the session: the one another client got while this one waited for the lock,
  // or a new authentication on `e` (under the lock, so the others wait for it and etcd checks
  // the password once). `refused`: etcd refused the token of token_generation.
  Status renew_token(Endpoint& e, bool refused) {
    refused = refused || refusal_unrenewed;
    std::unique_lock lock(session->mutex);
    if (session->generation != token_generation) {
      refusal_unrenewed = false;  // another client got the session a token since
      return adopt_locked(lock);
    }
    Result<std::string> fresh = authenticate(e);
    refusal_unrenewed = refused && !fresh.ok();
    if (!fresh.ok()) return fresh.status();
    if (fresh->empty() && !session->server_auth_off) {
      log_warn("etcd {} has authentication disabled: requests go without a user until it asks for one",
               e.url);
    }
    session->server_auth_off = fresh->empty();
    session->token = std::move(fresh).value();
    session->generation.fetch_add(1, std::memory_order_release);
    if (!session->token.empty()) {
      session->authentications.fetch_add(1, std::memory_order_relaxed);
      if (refused) session->reauthentications.fetch_add(1, std::memory_order_relaxed);
    }
    return adopt_locked(lock);
  }

  // POST /v3/auth/authenticate as the configured user, with the password read from its file
  // now: the token, or "" when etcd has authentication disabled.
  Result<std::string> authenticate(Endpoint& e) {
    token.clear();  // the request carries no Authorization header
    if (Status cleared = set_headers(); !cleared.ok()) return cleared;
    Result<std::string> password = read_password_file(config.password_file);
    if (!password.ok()) return Error{"etcd authentication: " + password.message()};
    std::string payload = json{{"name", config.user}, {"password", *password}}.dump();
    wipe(*password);
    Result<json> answer = exchange(e, "/v3/auth/authenticate", payload,
                                   std::max(config.request_timeout_ms, config.authenticate_timeout_ms));
    wipe(payload);
    token_refused_last = false;  // about the request that follows, not this one
    if (!answer.ok()) {
      // Unreachable, or a TLS failure (its message names the flag): not about the user.
      if (answer.code() == StatusCode::unavailable || !answered_last) return answer.status();
      if (contains(answer.message(), "authentication is not enabled")) return std::string();
      std::string message = "authentication as etcd user '" + config.user + "' failed: " + answer.message();
      if (contains(answer.message(), "invalid user ID or password")) {
        message += ": check --etcd-user and the password in --etcd-password-file " + config.password_file;
      }
      return Error{message};
    }
    std::string fresh = answer->value("token", std::string());
    if (!usable_token(fresh)) {
      return Error{"etcd " + e.url + " answered the authentication of user '" + config.user +
                   "' without a usable token"};
    }
    return fresh;
  }

  // One POST of `payload` to `path` on `e`, its answer read.
  Result<json> exchange(Endpoint& e, const char* path, const std::string& payload, std::uint32_t timeout_ms) {
    const std::string url = e.url + path;
    body.clear();
    curl_error[0] = '\0';
    token_refused_last = false;
    answered_last = false;
    curl_easy_setopt(e.handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e.handle, CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(e.handle, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    curl_easy_setopt(e.handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
    const CURLcode code = curl_easy_perform(e.handle);
    curl_easy_setopt(e.handle, CURLOPT_POSTFIELDS, "");  // no pointer to the payload outlives it
    if (code != CURLE_OK) return transport_error(e, code);
    long http_status = 0;
    curl_easy_getinfo(e.handle, CURLINFO_RESPONSE_CODE, &http_status);
    answered_last = true;
    return read_answer(e.url, path, http_status);
  }

  // A request that got no answer. What our own TLS configuration decides fails for good
  // (`failed`, naming the flag); anything else may be the network: unavailable, with a hint
  // where the likely cause is a TLS setting.
  Error transport_error(const Endpoint& e, CURLcode code) const {
    const std::string detail =
        curl_error[0] != '\0' ? std::string(curl_error.data()) : curl_easy_strerror(code);
    std::string message = e.url + ": " + detail;
    const std::string ca = config.ca_file.empty() ? "libcurl's default CA bundle" : config.ca_file;
    switch (code) {
      case CURLE_PEER_FAILED_VERIFICATION:
        return Error{
            message + ": etcd's certificate is not signed by the CA in --etcd-cacert (" + ca +
            "), or does not name the endpoint's host in its subjectAltName: fix --etcd-cacert or the "
            "endpoint"};
      case CURLE_SSL_CACERT_BADFILE:
        return Error{message + ": --etcd-cacert " + ca + " is not a readable PEM CA certificate"};
      case CURLE_SSL_CERTPROBLEM:
        return Error{message + ": --etcd-cert " + config.cert_file + " and --etcd-key " + config.key_file +
                     " cannot be used (not PEM, or the key is not the certificate's)"};
      default:
        break;
    }
    if (is_https(e.url) && contains(detail, "wrong version number")) {
      message += " (etcd answers plain HTTP on this port: use http://, or start etcd with TLS)";
    } else if (is_https(e.url) && (code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
                                   code == CURLE_SSL_CONNECT_ERROR || code == CURLE_GOT_NOTHING)) {
      message +=
          config.cert_file.empty()
              ? " (etcd closed the TLS connection: if it runs with --client-cert-auth it wants a client "
                "certificate: give --etcd-cert and --etcd-key)"
              : " (etcd closed the TLS connection: if it runs with --client-cert-auth, --etcd-cert must be "
                "signed by a CA in etcd's --trusted-ca-file)";
    } else if (!is_https(e.url) && code == CURLE_GOT_NOTHING) {
      message += " (an etcd serving TLS answers plain HTTP with nothing: use https://)";
    }
    return Error{message, StatusCode::unavailable};
  }

  // The answer in `body`: the parsed object, or a failure; StatusCode::unavailable when
  // this endpoint cannot serve now and the next should be tried. Sets token_refused_last.
  Result<json> read_answer(const std::string& url, const char* path, long http_status) {
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      if (http_status >= 500)
        return Error{url + ": HTTP " + std::to_string(http_status), StatusCode::unavailable};
      std::string message = url + path + ": unparsable answer (HTTP " + std::to_string(http_status) + ")";
      if (const std::string text = printable_excerpt(body); !text.empty()) message += ": " + text;
      if (contains(body, "CommonName of client")) {
        message +=
            ": etcd's JSON gateway refuses client certificates with a Common Name; issue flurryd's "
            "certificate (--etcd-cert) "
            "with an empty subject CN (its names in subjectAltName only)";
      }
      return Error{message};
    }
    // Errors come as {"error": "...", "code": N} (unary) or {"error": {...}} (streams).
    const json* error_object = nullptr;
    if (const auto it = parsed.find("error"); it != parsed.end()) {
      error_object = it->is_object() ? &*it : &parsed;
    }
    if (error_object == nullptr && http_status == 200) return parsed;
    const int grpc_code =
        error_object != nullptr ? error_object->value("code", 0) : (http_status == 404 ? grpc_not_found : 0);
    std::string message =
        error_object != nullptr ? error_object->value("message", std::string()) : std::string();
    if (message.empty()) message = "HTTP " + std::to_string(http_status);
    if (grpc_code == grpc_unavailable || grpc_code == grpc_deadline_exceeded || http_status >= 500) {
      return Error{url + ": " + message, StatusCode::unavailable};
    }
    token_refused_last = token_refused(grpc_code, message);
    if (grpc_code == grpc_permission_denied) {
      message +=
          config.user.empty()
              ? ": etcd refuses this without a user: give --etcd-user and --etcd-password-file"
              : ": etcd user '" + config.user +
                    "' may not do this: grant its role readwrite on the key prefix /flurry/ (etcdctl role "
                    "grant-permission ROLE --prefix=true readwrite /flurry/)";
    }
    return Error{url + path + ": " + message,
                 grpc_code == grpc_not_found ? StatusCode::not_found : StatusCode::failed};
  }
};

EtcdClient::EtcdClient(const EtcdConfig& config) : impl_(std::make_unique<Impl>()) { impl_->config = config; }

EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::create(const EtcdConfig& config) {
  static std::once_flag curl_once;
  static CURLcode curl_init = CURLE_OK;
  std::call_once(curl_once, [] { curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (curl_init != CURLE_OK) {
    return Error{std::string("libcurl initialisation failed: ") + curl_easy_strerror(curl_init)};
  }
  if (Status valid = check_config(config); !valid.ok()) return valid;
  if (config.request_timeout_ms == 0 || config.connect_timeout_ms == 0) {
    return Error{"etcd timeouts must be positive"};
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(config));
  Impl& impl = *client->impl_;
  impl.session = config.session ? config.session : std::make_shared<EtcdSession>();
  for (const std::string& url : config.endpoints) {
    CURL* handle = curl_easy_init();
    if (handle == nullptr) return Error{"libcurl could not create a handle"};
    impl.endpoints.push_back({url, handle});
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: threads are ours
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(config.request_timeout_ms));
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config.connect_timeout_ms));
    curl_easy_setopt(handle, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(handle, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, is_https(url) ? "https" : "http");
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, impl.curl_error.data());
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &impl.body);
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    if (is_https(url)) {
      // Peer and host verification are libcurl's defaults; kept, and TLS 1.2 at least.
      curl_easy_setopt(handle, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
      if (!config.ca_file.empty()) {
        // Only this CA: without clearing CAPATH, libcurl would also trust the system's CAs.
        curl_easy_setopt(handle, CURLOPT_CAINFO, config.ca_file.c_str());
        curl_easy_setopt(handle, CURLOPT_CAPATH, nullptr);
      }
      if (!config.cert_file.empty()) {
        curl_easy_setopt(handle, CURLOPT_SSLCERT, config.cert_file.c_str());
        curl_easy_setopt(handle, CURLOPT_SSLKEY, config.key_file.c_str());
      }
    }
  }
  if (Status headers = impl.set_headers(); !headers.ok()) return headers;
  return client;
}

std::string EtcdClient::endpoint() const { return impl_->endpoints[impl_->current].url; }

std::uint64_t EtcdClient::authentications() const {
  return impl_->session->authentications.load(std::memory_order_relaxed);
}

std::uint64_t EtcdClient::reauthentications() const {
  return impl_->session->reauthentications.load(std::memory_order_relaxed);
}

namespace {

// An answer of the wrong shape (not etcd, or another version): a failed call, never a throw.
Error not_understood(const nlohmann::json::exception& caught) {
  return Error{std::string("etcd answer not understood: ") + caught.what()};
}

// The txn answer's responses, one per executed op.
Result<TxnResult> txn_result(const Txn& txn, const json& answer) {
  TxnResult result;
  result.succeeded = answer.value("succeeded", false);
  if (const auto header = answer.find("header"); header != answer.end() && header->is_object()) {
    result.revision = as_int64(*header, "revision");
  }
  const std::vector<Op>& ops = result.succeeded ? txn.success : txn.failure;
  const auto responses = answer.find("responses");
  const std::size_t answered = responses != answer.end() && responses->is_array() ? responses->size() : 0;
  if (answered != ops.size()) {
    return Error{"etcd txn answered " + std::to_string(answered) + " responses for " +
                 std::to_string(ops.size()) + " operations"};
  }
  result.results.resize(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == Op::Kind::put || ops[i].kind == Op::Kind::del) continue;
    const json& item = (*responses)[i];
    const auto range = item.find("response_range");
    if (range == item.end() || !range->is_object() || !kvs_from_json(*range, &result.results[i])) {
      return Error{"etcd txn answered a malformed range response"};
    }
  }
  return result;
}

}  // namespace

Result<TxnResult> EtcdClient::txn(const Txn& txn) try {
  json request = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const Compare& c : txn.compares) request["compare"].push_back(compare_to_json(c));
  for (const Op& op : txn.success) request["success"].push_back(op_to_json(op));
  for (const Op& op : txn.failure) request["failure"].push_back(op_to_json(op));
  Result<json> answer = impl_->call("/v3/kv/txn", request, &failovers_);
  if (!answer.ok()) return answer.status();
  return txn_result(txn, *answer);
} catch (const nlohmann::json::exception& caught) {
  return not_understood(caught);
}

Result<LeaseGrant> EtcdClient::lease_grant(std::int64_t ttl_s) try {
  Result<json> answer = impl_->call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}, &failovers_);
  if (!answer.ok()) return answer.status();
  const LeaseGrant grant{as_int64(*answer, "ID"), as_int64(*answer, "TTL")};
  if (grant.lease_id == 0 || grant.ttl_s <= 0) {
    return Error{"etcd lease grant answered without a lease: " + answer->value("error", std::string())};
  }
  return grant;
} catch (const nlohmann::json::exception& caught) {
  return not_understood(caught);
}

Result<std::int64_t> EtcdClient::lease_keepalive(std::int64_t lease_id) try {
  Result<json> answer =
      impl_->call("/v3/lease/keepalive", json{{"ID", std::to_string(lease_id)}}, &failovers_);
  if (!answer.ok()) return answer.status();
  const auto result = answer->find("result");
  if (result == answer->end() || !result->is_object()) {
    return Error{"etcd lease keepalive answered without a result"};
  }
  const std::int64_t ttl_left_s = as_int64(*result, "TTL");
  if (ttl_left_s <= 0) {  // the gateway's way of saying "no such lease"
    return Error{"lease " + std::to_string(lease_id) + " has expired", StatusCode::not_found};
  }
  return ttl_left_s;
} catch (const nlohmann::json::exception& caught) {
  return not_understood(caught);
}

Status EtcdClient::lease_revoke(std::int64_t lease_id) try {
  Result<json> answer = impl_->call("/v3/lease/revoke", json{{"ID", std::to_string(lease_id)}}, &failovers_);
  if (!answer.ok()) return answer.status();
  return {};
} catch (const nlohmann::json::exception& caught) {
  return not_understood(caught);
}

}  // namespace flurry::control::cluster
