// tests/cluster/cluster_harness.cc — see cluster_harness.h.
#include "tests/cluster/cluster_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "control/cluster/etcd_client.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"

namespace flurry::test {

Etcd::Etcd(const std::string& dir, EtcdTls tls, std::vector<std::string> extra_args)
    : dir_(dir), tls_(std::move(tls)), extra_args_(std::move(extra_args)) {
  client_port_ = testing::free_tcp_port();
  peer_port_ = testing::free_tcp_port();
}

Etcd::~Etcd() { stop(); }

std::string Etcd::url() const {
  return (tls_.ca_file.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") + std::to_string(client_port_);
}

namespace {

// The sum of a metric's samples whose labels contain every one of `having`.
double metric_sum(const std::string& text, const std::string& name, const std::vector<std::string>& having) {
  double sum = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.compare(0, name.size(), name) != 0 || line.size() == name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    if (!std::all_of(having.begin(), having.end(),
                     [&](const std::string& h) { return line.find(h) != std::string::npos; }))
      continue;
    sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

}  // namespace

std::string Etcd::in_hand() const {
  // Established TCP connections to or from the client port, with bytes not yet read by etcd:
  // unsent by a client (tx_queue of a socket whose peer is etcd) or unread by etcd (rx_queue of
  // etcd's end). /proc/net/tcp: "sl local rem st tx_queue:rx_queue ...", ports in hex.
  std::string found;
  if (FILE* tcp = std::fopen("/proc/net/tcp", "re")) {
    char line[512];
    while (std::fgets(line, sizeof line, tcp) != nullptr) {
      unsigned local_port = 0, remote_port = 0, state = 0;
      unsigned long tx = 0, rx = 0;
      if (std::sscanf(line, " %*u: %*8x:%x %*8x:%x %x %lx:%lx", &local_port, &remote_port, &state, &tx,
                      &rx) != 5)
        continue;
      if (state != 1 /*ESTABLISHED*/) continue;
      if (remote_port == client_port_ && tx != 0) found += "a client's request not yet sent in full; ";
      if (local_port == client_port_ && rx != 0) found += "a request etcd has not read; ";
    }
    std::fclose(tcp);
  }
  const std::string metrics = testing::http_get_body(client_port_, "/metrics");
  if (metrics.empty()) return found + "no /metrics from etcd";
  const std::vector<std::string> unary = {"grpc_type=\"unary\""};
  const double started = metric_sum(metrics, "grpc_server_started_total", unary);
  const double handled = metric_sum(metrics, "grpc_server_handled_total", unary);
  if (started != handled) found += fmt::format("{} gRPC calls started, {} finished; ", started, handled);
  if (const double pending = metric_sum(metrics, "etcd_server_proposals_pending", {}); pending != 0)
    found += fmt::format("{} proposals pending", pending);
  return found;
}

bool Etcd::start(std::string* error) {
  for (int attempt = 1;; ++attempt) {
    if (start_once(error)) {
      started_ = true;
      return true;
    }
    const bool port_taken = process_.log().find("address already in use") != std::string::npos;
    if (started_ || !port_taken || attempt == 3) return false;
    process_.stop(10000);
    std::filesystem::remove_all(dir_ + "/etcd-data");  // nothing in it yet: it never started
    client_port_ = testing::free_tcp_port();
    peer_port_ = testing::free_tcp_port();
  }
}

bool Etcd::start_once(std::string* error) {
  const char* binary = std::getenv("ETCD");
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args = {
      "--name",
      "flurry-test",
      "--data-dir",
      dir_ + "/etcd-data",
      "--listen-client-urls",
      url(),
      "--advertise-client-urls",
      url(),
      "--listen-peer-urls",
      peer,
      "--initial-advertise-peer-urls",
      peer,
      "--initial-cluster",
      "flurry-test=" + peer,
      "--log-level",
      "warn",
  };
  if (!tls_.ca_file.empty()) {
    args.insert(args.end(), {"--cert-file", tls_.cert_file, "--key-file", tls_.key_file, "--trusted-ca-file",
                             tls_.ca_file});
    if (tls_.client_cert_auth) args.push_back("--client-cert-auth");
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  if (!process_.spawn(binary != nullptr && *binary != '\0' ? binary : "/usr/bin/etcd", args,
                      dir_ + "/etcd.log")) {
    *error = "cannot start etcd";
    return false;
  }
  // Ready when a transaction goes through (bounded: 60 s, for an etcd that never gets ready;
  // on a loaded machine a start can take many seconds).
  flurry::control::cluster::EtcdConfig config;
  config.endpoints = {url()};
  config.request_timeout_ms = 500;
  config.ca_file = tls_.ca_file;
  config.cert_file = tls_.client_cert;
  config.key_file = tls_.client_key;
  auto client = flurry::control::cluster::EtcdClient::create(config);
  if (!client.ok()) {
    *error = client.message();
    return false;
  }
  const std::uint64_t deadline = now_ms() + 60000;
  std::string last;
  while (now_ms() < deadline) {
    const auto answered = (*client)->txn({});
    // An etcd with auth enabled answers, but wants a user: serving all the same.
    if (answered.ok() || answered.message().find("user name is empty") != std::string::npos) return true;
    last = answered.message();
    if (!process_.running()) break;
    sleep_ms(50);
  }
  *error = "etcd did not become ready: " + last + "\n" + process_.log();
  return false;
}

void Etcd::stop() { process_.stop(10000); }

std::optional<std::string> etcd_get(const std::string& url, const std::string& key) {
  flurry::control::cluster::EtcdConfig config;
  config.endpoints = {url};
  config.request_timeout_ms = 2000;
  auto client = flurry::control::cluster::EtcdClient::create(config);
  if (!client.ok()) return std::nullopt;
  flurry::control::cluster::Txn txn;
  txn.success.push_back(flurry::control::cluster::Op::get(key));
  // A read that got no answer is asked again (bounded: 10 s), so that an etcd slow to answer on
  // a loaded machine is never taken for a key that is absent: the tests read "absent" as a
  // fact (a lease expired, a tombstone gone).
  for (const std::uint64_t deadline = now_ms() + 10000;; sleep_ms(100)) {
    const auto result = (*client)->txn(txn);
    if (result.ok()) {
      if (result->results.empty() || result->results[0].empty()) return std::nullopt;
      return result->results[0][0].value;
    }
    if (now_ms() >= deadline) return std::nullopt;
  }
}

Flurryd::Flurryd(const std::string& dir, const std::string& name, const FlurrydOptions& options) {
  const char* binary = std::getenv("FLURRYD");
  port_ = testing::free_udp_port();
  state_dir_ = dir + "/" + name;
  log_path_ = dir + "/" + name + ".log";
  binary_ = binary != nullptr ? binary : "flurryd";
  args_ = {"--etcd",
           options.etcd_url,
           "--cluster",
           options.cluster,
           "--state-dir",
           state_dir_,
           "--listen",
           "127.0.0.1:" + std::to_string(port_),
           "--lease-ttl-s",
           std::to_string(options.lease_ttl_s),
           "--lead-ms",
           std::to_string(options.lead_ms),
           "--pin-workers=false"};
  if (!options.layout.empty()) {
    args_.push_back("--layout");
    args_.push_back(options.layout);
  }
  if (options.clock_offset_ms != 0) {
    args_.push_back("--clock-offset-ms");
    args_.push_back(std::to_string(options.clock_offset_ms));
  }
  if (options.clock_skew_ms_max != 0) {
    args_.push_back("--clock-skew-ms-max");
    args_.push_back(std::to_string(options.clock_skew_ms_max));
  }
  for (const auto& a : options.extra_args) args_.push_back(a);
  env_ = options.env;
}

bool Flurryd::start() { return process_.spawn(binary_, args_, log_path_, env_); }

UdpClient::UdpClient(std::uint16_t port) {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
}

UdpClient::~UdpClient() {
  if (fd_ >= 0) close(fd_);
}

std::optional<Answer> UdpClient::get_ids(std::uint32_t count, std::uint32_t timeout_ms) {
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = count;
  return exchange(request, timeout_ms);
}

namespace {

proto::Request seq_request(const std::string& name, std::uint32_t count) {
  proto::Request request;
  request.opcode = proto::Opcode::get_seq;
  request.count = count;
  request.name.size = static_cast<std::uint8_t>(std::min(name.size(), request.name.bytes.size()));
  std::copy_n(name.begin(), request.name.size, request.name.bytes.begin());
  return request;
}

}  // namespace

std::optional<Answer> UdpClient::get_seq(const std::string& name, std::uint32_t count,
                                         std::uint32_t timeout_ms) {
  return exchange(seq_request(name, count), timeout_ms);
}

std::optional<Answer> UdpClient::exchange(proto::Request request, std::uint32_t timeout_ms) {
  const std::uint64_t request_id = send_request(request);
  if (request_id == 0) return std::nullopt;
  return receive(request_id, now_ms() + timeout_ms);
}

std::uint64_t UdpClient::send_request(proto::Request request) {
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  const std::uint64_t request_id = next_request_id_++;
  request.request_id = request_id;
  const std::size_t size = proto::encode_request(request, buffer, proto::request_size_for_ranges(8));
  if (send(fd_, buffer.data(), size, 0) != static_cast<ssize_t>(size)) return 0;
  return request_id;
}

std::optional<Answer> UdpClient::receive(std::uint64_t request_id, std::uint64_t deadline_ms) {
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  for (;;) {
    const std::uint64_t now = now_ms();
    if (now >= deadline_ms) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(deadline_ms - now)) <= 0) return std::nullopt;
    const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
    if (n <= 0) continue;  // e.g. ECONNREFUSED while the server is not up
    const proto::ResponseView view =
        proto::decode_response(std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(n)));
    if (view.error != proto::ResponseError::ok || (request_id != 0 && view.header.request_id != request_id))
      continue;  // a late answer
    Answer answer;
    answer.status = view.header.status;
    answer.node = view.header.node;
    answer.detail = view.header.detail;
    for (std::size_t i = 0; i < view.header.range_count; ++i) answer.ranges.push_back(view.range(i));
    return answer;
  }
}

bool UdpClient::send_get_seq(const std::string& name, std::uint32_t count) {
  return send_request(seq_request(name, count)) != 0;
}

std::vector<Answer> UdpClient::receive_all(std::uint32_t timeout_ms) {
  std::vector<Answer> out;
  const std::uint64_t deadline = now_ms() + timeout_ms;
  while (auto answer = receive(0, deadline)) out.push_back(std::move(*answer));
  return out;
}

std::string find_overlap(std::vector<proto::Range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i - 1].first + ranges[i - 1].count > ranges[i].first) {
      return "ranges [" + std::to_string(ranges[i - 1].first) + " +" + std::to_string(ranges[i - 1].count) +
             ") and [" + std::to_string(ranges[i].first) + " +" + std::to_string(ranges[i].count) +
             ") overlap";
    }
  }
  return {};
}

}  // namespace flurry::test
