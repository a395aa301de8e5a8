// dataplane/http_frontend.cc — see http_frontend.h.
#include "dataplane/http_frontend.h"

#include <microhttpd.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <exception>

namespace flurry::dataplane {

namespace {

constexpr unsigned connection_timeout_s = 10;
constexpr const char* json_type = "application/json";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

MHD_Result respond(MHD_Connection* connection, const HttpFrontend::Answer& answer) {
  MHD_Response* response = MHD_create_response_from_buffer(
      answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type);
  if (answer.status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (answer.retry_after_s != 0) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER,
                            std::to_string(answer.retry_after_s).c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, answer.status, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result access(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                  const char*, std::size_t*, void**) {
  auto* self = static_cast<HttpFrontend*>(cls);
  try {
    const char* n = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "n");
    const char* format = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "format");
    const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    return respond(connection, self->answer(method, url, n, format, accept));
  } catch (...) {
    return MHD_NO;  // nothing may unwind through libmicrohttpd's C frames
  }
}

void notify(void* cls, MHD_Connection*, void**, MHD_ConnectionNotificationCode code) {
  if (code == MHD_CONNECTION_NOTIFY_STARTED) static_cast<HttpFrontend*>(cls)->count_connection();
}

}  // namespace

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::open(const FrontendConfig& config, core::Shared& shared,
                                                         core::WorkerStats& stats) {
  Result<int> fd = listen_tcp(config.address, config.port, "--http-listen");
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(config, shared, stats, fd.value()));
}

HttpFrontend::HttpFrontend(const FrontendConfig& config, core::Shared& shared, core::WorkerStats& stats,
                           int listen_fd)
    : config_(config), issuer_(config.slice, shared, stats), listen_fd_(listen_fd) {}

HttpFrontend::~HttpFrontend() {
  stop();
  if (listen_fd_ >= 0) close(listen_fd_);
}

Status HttpFrontend::start() {
  // One internal thread serves every connection: the slice is never touched by two threads.
  daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, nullptr, nullptr, &access,
                             this, MHD_OPTION_LISTEN_SOCKET, listen_fd_, MHD_OPTION_CONNECTION_LIMIT,
                             config_.connections_max, MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_s,
                             MHD_OPTION_NOTIFY_CONNECTION, &notify, this, MHD_OPTION_END);
  if (daemon_ == nullptr) return Error{"--http-listen: libmicrohttpd did not start"};
  listen_fd_ = -1;  // libmicrohttpd closes it when stopped
  return {};
}

void HttpFrontend::stop() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

void HttpFrontend::visit_counters(const CounterVisitor& visit) const {
  counters_.visit("http", config_.slice.core, visit);
}

HttpFrontend::Answer HttpFrontend::answer(std::string_view method, std::string_view url, const char* n,
                                          const char* format, const char* accept) {
  if (method != "GET" && method != "HEAD") {
    counters_.add(FrontendCount::bad_request);
    return {MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET or HEAD\n"};
  }
  if (url == "/v1/ids") {
    const bool text = (format != nullptr && std::string_view(format) == "text") ||
                      (accept != nullptr && std::strstr(accept, "text/plain") != nullptr &&
                       std::strstr(accept, json_type) == nullptr);
    return ids(n, text, false);
  }
  if (starts_with(url, "/api/snowflake/get/")) return ids(nullptr, true, true);
  if (url == "/v1/info") {
    counters_.add(FrontendCount::requests_other);
    return {MHD_HTTP_OK, config_.info};
  }
  counters_.add(FrontendCount::bad_request);
  if (starts_with(url, "/api/segment/get/")) {
    return {MHD_HTTP_NOT_FOUND,
            "named sequences are not served by this flurryd; /api/snowflake/get/KEY gives IDs\n"};
  }
  return {MHD_HTTP_NOT_FOUND, "not found: GET /v1/ids?n=N, /v1/info, /api/snowflake/get/KEY\n"};
}

HttpFrontend::Answer HttpFrontend::ids(const char* n_text, bool text, bool one_plain) {
  counters_.add(FrontendCount::requests_ids);
  std::uint32_t n = 1;
  if (n_text != nullptr) {
    const std::string_view value(n_text);
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > config_.ids_per_call_max) {
      counters_.add(FrontendCount::bad_request);
      return {MHD_HTTP_BAD_REQUEST,
              "n must be a whole number from 1 to " + std::to_string(config_.ids_per_call_max) + "\n"};
    }
  }
  ids_.clear();
  const Issued issued = issuer_.issue(n, ids_);
  counters_.add(FrontendCount::ids_issued, ids_.size());
  if (issued.status == proto::Status::retry) {
    counters_.add(FrontendCount::answered_retry);
    const unsigned after_s = std::max(1U, (issued.retry_hint_us + 999'999) / 1'000'000);
    return {MHD_HTTP_SERVICE_UNAVAILABLE, "the node's issue ceiling is reached; retry\n",
            "text/plain; charset=utf-8", after_s};
  }
  if (issued.status != proto::Status::ok) {
    counters_.add(FrontendCount::answered_fenced);
    return {MHD_HTTP_SERVICE_UNAVAILABLE, "fenced: this node has lost its node id; ask another flurryd\n"};
  }
  Answer answer;
  if (one_plain) {
    answer.body = std::to_string(ids_[0]);
  } else if (text) {
    for (const std::uint64_t id : ids_) answer.body += std::to_string(id) + "\n";
  } else {
    answer.content_type = json_type;
    answer.body = "{\"ids\":[";
    for (std::size_t i = 0; i < ids_.size(); ++i)
      answer.body += (i == 0 ? "" : ",") + std::to_string(ids_[i]);
    answer.body += "],\"node\":" + std::to_string(issuer_.node_id()) + "}";
  }
  return answer;
}

}  // namespace flurry::dataplane
