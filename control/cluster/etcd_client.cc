// control/cluster/etcd_client.cc — see etcd_client.h.
#include "control/cluster/etcd_client.h"

#include <curl/curl.h>

#include <array>
#include <charconv>
#include <mutex>
#include <nlohmann/json.hpp>

namespace flurry::control::cluster {
namespace {

using nlohmann::json;

constexpr std::size_t answer_size_max = 4U << 20;  // a bounded answer; ours are tiny

constexpr std::string_view base64_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// gRPC status codes that the gateway puts in "code".
constexpr int grpc_deadline_exceeded = 4;
constexpr int grpc_not_found = 5;
constexpr int grpc_unavailable = 14;

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
    const std::string_view scheme = "http://";
    const std::size_t colon = item.rfind(':');
    if (item.substr(0, scheme.size()) != scheme || colon == std::string_view::npos ||
        colon < scheme.size() + 1 || colon + 1 == item.size()) {
      return Error{"etcd endpoint '" + std::string(item) +
                   "' is not of the form http://HOST:PORT (list them as URL,URL,URL)"};
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

  ~Impl() {
    for (Endpoint& e : endpoints) {
      if (e.handle != nullptr) curl_easy_cleanup(e.handle);
    }
    if (headers != nullptr) curl_slist_free_all(headers);
  }

  // POSTs `request` to `path` on one endpoint after another until one answers. Returns the
  // parsed answer; fails not_found for a gRPC NotFound answer, failed for other error
  // answers, unavailable when no endpoint answered usefully.
  Result<json> call(const char* path, const json& request, std::uint64_t* failovers) {
    const std::string payload = request.dump();
    std::string last_error;
    for (std::size_t attempt = 0; attempt < endpoints.size(); ++attempt) {
      if (attempt > 0) {
        current = (current + 1) % endpoints.size();
        ++*failovers;
      }
      Endpoint& e = endpoints[current];
      const std::string url = e.url + path;
      body.clear();
      curl_easy_setopt(e.handle, CURLOPT_URL, url.c_str());
      curl_easy_setopt(e.handle, CURLOPT_POSTFIELDS, payload.c_str());
      curl_easy_setopt(e.handle, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
      const CURLcode code = curl_easy_perform(e.handle);
      if (code != CURLE_OK) {
        last_error = e.url + ": " + curl_easy_strerror(code);
        continue;
      }
      long http_status = 0;
      curl_easy_getinfo(e.handle, CURLINFO_RESPONSE_CODE, &http_status);
      Result<json> answer = read_answer(e.url, path, http_status);
      if (answer.code() == StatusCode::unavailable) {
        last_error = answer.message();  // this endpoint cannot serve now: try the next
        continue;
      }
      return answer;
    }
    return Error{"etcd unreachable (" + last_error + ")", StatusCode::unavailable};
  }

  // The answer in `body`: the parsed object, or a failure; StatusCode::unavailable when
  // this endpoint cannot serve now and the next should be tried.
  Result<json> read_answer(const std::string& url, const char* path, long http_status) {
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      if (http_status >= 500)
        return Error{url + ": HTTP " + std::to_string(http_status), StatusCode::unavailable};
      return Error{url + path + ": unparsable answer (HTTP " + std::to_string(http_status) + ")"};
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
  if (config.endpoints.empty()) return Error{"no etcd endpoint given"};
  if (config.request_timeout_ms == 0 || config.connect_timeout_ms == 0) {
    return Error{"etcd timeouts must be positive"};
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(config));
  Impl& impl = *client->impl_;
  impl.headers = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const std::string& url : config.endpoints) {
    CURL* handle = curl_easy_init();
    if (handle == nullptr || impl.headers == nullptr) return Error{"libcurl could not create a handle"};
    impl.endpoints.push_back({url, handle});
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: threads are ours
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(config.request_timeout_ms));
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config.connect_timeout_ms));
    curl_easy_setopt(handle, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(handle, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, impl.headers);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &impl.body);
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
  }
  return client;
}

std::string EtcdClient::endpoint() const { return impl_->endpoints[impl_->current].url; }

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
