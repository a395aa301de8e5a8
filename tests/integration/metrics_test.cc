// tests/integration/metrics_test.cc — flurryd's Prometheus endpoint (--metrics-listen), checked
// on loopback with libcurl and the real Prometheus tools:
//
//   * GET /metrics answers 200 `text/plain; version=0.0.4` and `promtool check metrics` accepts
//     the text with no lint problem; another path is 404, another method 405; HEAD and a query
//     string work; idle connections up to the limit do not keep a scrape out;
//   * after N IDs fetched through the client library, flurry_ids_issued_total sums to >= N;
//   * a real Prometheus server scraping flurryd every second reports sum(flurry_ids_issued_total)
//     >= N and up{job="flurry"} == 1 through its query API; every ID received is unique;
//   * a malformed --metrics-listen (flag or TOML key) exits 2 naming the flag; a port already
//     taken exits non-zero naming the address and the flag.
//
// prometheus and promtool come from scripts/setup (Debian package `prometheus`), found through
// $PROMETHEUS / $PROMTOOL (set by meson) or PATH; a missing one fails the test, never skips it.
// Every process started here is stopped by PID and every directory made here is removed.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "client/client.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::free_tcp_port;
using testing::TempDir;

// The path of a tool scripts/setup installs: $variable if set, else the first match on PATH.
std::string tool(const char* variable, const std::string& name) {
  if (const char* set = std::getenv(variable); set != nullptr && *set != '\0') return set;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = dir + "/" + name;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

#define REQUIRE_TOOL(var, variable, name)                                                      \
  const std::string var = tool(variable, name);                                                \
  ASSERT_FALSE(var.empty()) << name << " not found ($" << variable << " unset, not on PATH): " \
                            << "install the Debian package prometheus (scripts/setup does), "  \
                            << "then reconfigure the build dir"

struct HttpAnswer {
  long status = 0;  // 0: no HTTP answer (see error)
  std::string content_type;
  std::string body;
  std::string error;
};

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

// One request with a fresh connection, bounded by `timeout_ms`; never through a proxy. The
// default is far beyond an answer from the control loop of a sanitizer build on a loaded
// machine: only a server that never answers waits it out.
HttpAnswer http(const std::string& method, const std::string& url, long timeout_ms = 10'000) {
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  HttpAnswer answer;
  if (init != CURLE_OK) {
    answer.error = "curl_global_init failed";
    return answer;
  }
  CURL* handle = curl_easy_init();
  if (handle == nullptr) {
    answer.error = "curl_easy_init failed";
    return answer;
  }
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &answer.body);
  if (method == "HEAD") {
    curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
  } else if (method == "POST") {
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS, "");
  } else if (method != "GET") {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  const CURLcode code = curl_easy_perform(handle);
  if (code == CURLE_OK) {
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &answer.status);
    const char* type = nullptr;
    curl_easy_getinfo(handle, CURLINFO_CONTENT_TYPE, &type);
    if (type != nullptr) answer.content_type = type;
  } else {
    answer.error = curl_easy_strerror(code);
  }
  curl_easy_cleanup(handle);
  return answer;
}

std::string escape(const std::string& text) {
  char* escaped = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped != nullptr ? escaped : "";
  curl_free(escaped);
  return out;
}

// Runs `binary args...` with `input` on stdin, to completion (bounded by 10 s).
testing::RunResult run_with_input(const std::string& binary, const std::vector<std::string>& args,
                                  const std::string& input) {
  const testing::TempDir dir("flurry-metrics-run-");
  std::ofstream(dir.sub("input")) << input;
  return testing::run_to_end(binary, args, 10'000, dir.sub("input"));
}

// The sum of every sample of `name` (any labels) in Prometheus text; -1 if there is none.
double sum_samples(const std::string& text, const std::string& name) {
  double sum = -1;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    const auto space = line.rfind(' ');
    sum = (sum < 0 ? 0 : sum) + std::stod(line.substr(space + 1));
  }
  return sum;
}

struct Server {
  TempDir state{"flurry-metrics-"};
  std::uint16_t port = testing::free_udp_port();
  std::uint16_t metrics_port = free_tcp_port();
  std::string flurryd = testing::env_or_die("FLURRYD");
  ChildProcess daemon;
  std::chrono::steady_clock::time_point started;

  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string metrics_address() const { return "127.0.0.1:" + std::to_string(metrics_port); }
  std::string url(const std::string& path) const { return "http://" + metrics_address() + path; }

  // Starts flurryd and waits (bounded) until it answers GET_IDS and GET /metrics.
  void start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        "--state-dir",     state.path(), "--init", "--listen",  address(), "--metrics-listen",
        metrics_address(), "--workers",  "2",      "--lead-ms", "1000"};
    args.insert(args.end(), extra.begin(), extra.end());
    started = std::chrono::steady_clock::now();
    ASSERT_TRUE(daemon.spawn(flurryd, args, state.sub("flurryd.log")));
    testing::wait_serving(daemon, address(), [this] { return http("GET", url("/metrics")).status == 200; });
  }

  void stop() {
    daemon.signal(SIGTERM);
    const auto code = daemon.wait(10'000);
    EXPECT_TRUE(code) << "flurryd did not stop within 10 s of SIGTERM:\n" << daemon.log();
    if (code) {
      EXPECT_EQ(*code, 0) << daemon.log();
    }
  }
};

TEST(Metrics, EndpointServesValidPrometheusTextAndNothingElse) {
  REQUIRE_TOOL(promtool, "PROMTOOL", "promtool");
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  EXPECT_NE(server.daemon.log().find("http://" + server.metrics_address() + "/metrics"), std::string::npos)
      << "the metrics URL is not logged at start:\n"
      << server.daemon.log();

  const auto scrape = http("GET", server.url("/metrics"));
  ASSERT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_EQ(scrape.content_type.rfind("text/plain; version=0.0.4", 0), 0U) << scrape.content_type;
  EXPECT_NE(scrape.body.find("# TYPE flurry_ids_issued_total counter"), std::string::npos) << scrape.body;
  const auto check = run_with_input(promtool, {"check", "metrics"}, scrape.body);
  EXPECT_EQ(check.exit_code, 0) << "promtool check metrics:\n" << check.output << "\non:\n" << scrape.body;
  EXPECT_EQ(check.output.find("error"), std::string::npos) << check.output;
  // promtool prints lint problems as "<metric> <problem>" lines; a clean text prints nothing.
  EXPECT_TRUE(check.output.empty()) << "lint problems:\n" << check.output;

  const auto other = http("GET", server.url("/"));
  EXPECT_EQ(other.status, 404) << other.error;
  EXPECT_EQ(http("GET", server.url("/metricsx")).status, 404);
  EXPECT_EQ(http("GET", server.url("/metrics/")).status, 404);
  const auto post = http("POST", server.url("/metrics"));
  EXPECT_EQ(post.status, 405) << post.error;
  EXPECT_EQ(http("DELETE", server.url("/metrics")).status, 405);
  const auto head = http("HEAD", server.url("/metrics"));
  EXPECT_EQ(head.status, 200) << head.error;
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(http("GET", server.url("/metrics?name[]=up")).status, 200);

  // Served by the control loop: no thread of libmicrohttpd's own. flurryd's threads are the
  // control thread, the renew thread (flurry-renew: watermark writes, so a hanging disk never
  // blocks this endpoint), the sequence thread (flurry-seq: named sequences' block
  // reservations) and the 2 workers (io_uring's kernel workers, iou-wrk-*, aside). The renew
  // and sequence threads name themselves once they run: read until both names are there
  // (bounded), a loaded machine may not have run them yet.
  std::size_t flurryd_threads = 0;
  std::string names;
  for (const std::uint64_t until = testing::now_ms() + 30'000;; testing::sleep_ms(50)) {
    flurryd_threads = 0;
    names.clear();
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(server.daemon.pid()) + "/task")) {
      std::string name;
      std::getline(std::ifstream(task.path() / "comm"), name);
      names += name + " ";
      if (name.rfind("iou-", 0) != 0) ++flurryd_threads;
    }
    const bool named =
        names.find("flurry-renew") != std::string::npos && names.find("flurry-seq") != std::string::npos;
    if (named || testing::now_ms() >= until) break;
  }
#if defined(__SANITIZE_THREAD__)
  constexpr std::size_t runtime_threads = 1;  // TSan's background thread (same build tree)
#else
  constexpr std::size_t runtime_threads = 0;
#endif
  EXPECT_EQ(flurryd_threads, 5U + runtime_threads) << "threads: " << names;
  EXPECT_NE(names.find("flurry-renew"), std::string::npos) << "threads: " << names;
  EXPECT_NE(names.find("flurry-seq"), std::string::npos) << "threads: " << names;

  // Idle connections never lock the endpoint: with 16 held (the limit; 8 from one address are
  // kept, the address's oldest closed for its newer ones), a scrape is still served, the door
  // closing the connection idle the longest for it.
  std::vector<int> idle;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server.metrics_port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 16; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    idle.push_back(fd);
  }
  HttpAnswer again;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline &&
         (again = http("GET", server.url("/metrics"))).status != 200) {
    std::this_thread::sleep_for(50ms);
  }
  for (const int fd : idle) close(fd);
  EXPECT_EQ(again.status, 200) << again.error;
  server.stop();
}

// One instant query against Prometheus's HTTP API: the value of the first sample, or nullopt
// (no answer yet, no sample yet, or an error — kept in *why for the failure message).
std::optional<double> query(std::uint16_t port, const std::string& promql, std::string* why) {
  const auto answer =
      http("GET", "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=" + escape(promql));
  if (answer.status != 200) {
    *why = "HTTP " + std::to_string(answer.status) + " " + answer.error + " " + answer.body;
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(answer.body, nullptr, false);
  if (json.is_discarded() || json.value("status", "") != "success" || !json.contains("data") ||
      !json["data"].contains("result") || !json["data"]["result"].is_array()) {
    *why = "unexpected answer: " + answer.body;
    return std::nullopt;
  }
  const auto& result = json["data"]["result"];
  if (result.empty()) {
    *why = "no sample yet: " + answer.body;
    return std::nullopt;
  }
  const auto& value = result[0]["value"];
  if (!value.is_array() || value.size() != 2 || !value[1].is_string()) {
    *why = "unexpected sample: " + answer.body;
    return std::nullopt;
  }
  *why = answer.body;
  return std::stod(value[1].get<std::string>());
}

// Kubernetes-style probes on the metrics listener: /livez while the process and its loops
// live, /readyz only while serving; `?verbose` names every check; drain makes it unready.
TEST(Metrics, LivezAndReadyzFollowTheServeState) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  HttpAnswer livez = http("GET", server.url("/livez"));
  EXPECT_EQ(livez.status, 200) << livez.error;
  EXPECT_EQ(livez.body, "ok\n");
  // Ready, asked until both forms say so (bounded): a serving node is unready for a moment
  // while a watermark write is pending past stall_ms (250 ms at --lead-ms 1000), which a busy
  // disk on a loaded machine can make happen between any two questions.
  HttpAnswer readyz;
  HttpAnswer verbose;
  for (const std::uint64_t until = testing::now_ms() + 30'000; testing::now_ms() < until;
       testing::sleep_ms(50)) {
    readyz = http("GET", server.url("/readyz"));
    verbose = http("GET", server.url("/readyz?verbose"));
    if (readyz.status == 200 && verbose.status == 200) break;
  }
  EXPECT_EQ(readyz.status, 200) << readyz.error << readyz.body;
  EXPECT_EQ(readyz.body, "ok\n");
  EXPECT_EQ(verbose.body, "[+]serving ok\nreadyz check passed\n");
  livez = http("GET", server.url("/livez?verbose"));
  EXPECT_EQ(livez.body, "[+]control_loop ok\n[+]workers ok\nlivez check passed\n");
  EXPECT_EQ(http("POST", server.url("/readyz")).status, 405);
  EXPECT_EQ(http("HEAD", server.url("/livez")).status, 200);

  const testing::RunResult drained =
      testing::run_to_end(testing::env_or_die("FLURRYCTL"),
                          {"--control-socket", server.state.sub("flurryd.sock"), "drain"}, 10'000);
  ASSERT_EQ(drained.exit_code, 0) << drained.output;
  readyz = http("GET", server.url("/readyz?verbose"));
  EXPECT_EQ(readyz.status, 503);
  EXPECT_NE(readyz.body.find("[-]serving failed: state draining"), std::string::npos) << readyz.body;
  EXPECT_NE(readyz.body.find("readyz check failed"), std::string::npos) << readyz.body;
  EXPECT_EQ(http("GET", server.url("/livez")).status, 200) << "a drained flurryd is alive, only not ready";
  server.stop();
}

// The alerting rules (control/ops/flurry.rules.yml) name only metrics flurryd exports, so a
// renamed metric cannot leave an alert that never fires. Cluster-only families (flurry_lease_*)
// are checked by name in control/cluster/cluster_mode.cc's output instead: not here.
TEST(Metrics, AlertRulesNameOnlyExportedMetrics) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  const std::string text = http("GET", server.url("/metrics")).body;
  std::ifstream rules_file(testing::env_or_die("FLURRY_RULES"));
  const std::string rules((std::istreambuf_iterator<char>(rules_file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(rules.empty());
  std::size_t checked = 0;
  for (std::size_t at = rules.find("flurry_"); at != std::string::npos; at = rules.find("flurry_", at + 1)) {
    std::size_t end = at;
    while (end < rules.size() && (std::isalnum(static_cast<unsigned char>(rules[end])) || rules[end] == '_'))
      ++end;
    const std::string name = rules.substr(at, end - at);
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(rules[at - 1])) || rules[at - 1] == '.')) continue;
    if (name.rfind("flurry_lease_", 0) == 0 || name.find('.') != std::string::npos) continue;
    ++checked;
    EXPECT_NE(text.find("\n" + name), std::string::npos) << name << " is in the rules but not in /metrics";
  }
  EXPECT_GE(checked, 10U) << "the rules should name flurry's metrics";

  // And the metric table of docs/operations.md (FLURRY_README) documents every family exported.
  std::ifstream readme_file(testing::env_or_die("FLURRY_README"));
  const std::string readme((std::istreambuf_iterator<char>(readme_file)), std::istreambuf_iterator<char>());
  std::size_t families = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    ++families;
    EXPECT_NE(readme.find("| `" + name + "` |"), std::string::npos)
        << name << " is exported but not in docs/operations.md's metric table";
  }
  EXPECT_GE(families, 15U);
  server.stop();
}

// Every panel of control/ops/flurry-dashboard.json, its Grafana variables filled in, must
// parse and return data from a Prometheus scraping flurryd: the dashboard cannot rot.
void expect_every_panel_returns_data(std::uint16_t prometheus_port) {
  std::ifstream file(testing::env_or_die("FLURRY_DASHBOARD"));
  const auto dashboard = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded()) << "the dashboard is not JSON";
  std::size_t checked = 0;
  for (const auto& panel : dashboard.at("panels")) {
    for (const auto& target : panel.at("targets")) {
      std::string expr = target.at("expr").get<std::string>();
      for (const auto& [variable, value] : {std::pair<std::string, std::string>{"$instance", ".+"},
                                            std::pair<std::string, std::string>{"$__rate_interval", "1m"}}) {
        for (auto at = expr.find(variable); at != std::string::npos; at = expr.find(variable)) {
          expr.replace(at, variable.size(), value);
        }
      }
      std::string why;
      std::optional<double> value;
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (!(value = query(prometheus_port, expr, &why)) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(250ms);
      }
      EXPECT_TRUE(value) << "panel '" << panel.at("title").get<std::string>() << "': " << expr << ": " << why;
      ++checked;
    }
  }
  EXPECT_GE(checked, 10U);
  std::printf("%zu dashboard panel queries returned data\n", checked);
}

TEST(Metrics, RealPrometheusScrapesTheIssuedIds) {
  REQUIRE_TOOL(prometheus, "PROMETHEUS", "prometheus");
  Server server;
  // With a RESP front end, so the dashboard's front-end panel has a series.
  ASSERT_NO_FATAL_FAILURE(server.start({"--resp-listen", "127.0.0.1:" + std::to_string(free_tcp_port())}));

  // N IDs through the client library; every one unique.
  constexpr std::size_t ids_wanted = 100'000;
  client::Options options;
  options.servers = {server.address()};
  options.timeout = 2000ms;  // every answer must come: far beyond a loaded machine's delays
  options.attempts = 5;
  client::Error error;
  auto client = client::Client::create(options, &error);
  ASSERT_TRUE(client) << error.message;
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(client->get(ids_wanted, ids, &error)) << error.message;
  ASSERT_EQ(ids.size(), ids_wanted);
  const std::unordered_set<std::uint64_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), ids.size()) << "duplicate IDs among " << ids.size();

  // flurryd's own endpoint counts them (the start-up probe took one more, so >=).
  const auto scrape = http("GET", server.url("/metrics"));
  ASSERT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_GE(sum_samples(scrape.body, "flurry_ids_issued_total"), static_cast<double>(ids_wanted))
      << scrape.body;
  // The workers were busy for a while, and never longer than flurryd has run (two workers).
  const double busy_s = sum_samples(scrape.body, "flurry_worker_busy_seconds_total");
  EXPECT_GT(busy_s, 0.0) << scrape.body;
  EXPECT_LT(busy_s,
            2 * std::chrono::duration<double>(std::chrono::steady_clock::now() - server.started).count())
      << scrape.body;

  // A real Prometheus scraping flurryd every second.
  TempDir dir("flurry-prometheus-");
  const std::uint16_t prometheus_port = free_tcp_port();
  const std::string config =
      "global:\n"
      "  scrape_interval: 1s\n"
      "  scrape_timeout: 1s\n"
      "  evaluation_interval: 1s\n"
      "scrape_configs:\n"
      "  - job_name: flurry\n"
      "    static_configs:\n"
      "      - targets: ['" +
      server.metrics_address() + "']\n";
  std::ofstream(dir.sub("prometheus.yml")) << config;
  ChildProcess prom;  // destroyed (stopped if still running) before `dir` is removed
  ASSERT_TRUE(
      prom.spawn(prometheus,
                 {"--config.file=" + dir.sub("prometheus.yml"), "--storage.tsdb.path=" + dir.sub("data"),
                  "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=info"},
                 dir.sub("prometheus.log")));

  std::optional<double> issued;
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + 60s;  // Prometheus starts, then scrapes
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(prom.running()) << "prometheus exited:\n" << prom.log();
    issued = query(prometheus_port, "sum(flurry_ids_issued_total)", &why);
    if (issued && *issued >= static_cast<double>(ids_wanted)) break;
    std::this_thread::sleep_for(250ms);
  }
  ASSERT_TRUE(issued) << "Prometheus has no flurry_ids_issued_total after 60 s: " << why
                      << "\nprometheus log:\n"
                      << prom.log() << "\nflurryd log:\n"
                      << server.daemon.log();
  EXPECT_GE(*issued, static_cast<double>(ids_wanted)) << why;
  // A scrape succeeded (the issued IDs above came through one); the latest may have timed out
  // on a loaded machine (scrape_timeout 1 s), so "up" is asked over the last minute.
  const auto up = query(prometheus_port, "max_over_time(up{job=\"flurry\"}[1m])", &why);
  ASSERT_TRUE(up) << why;
  EXPECT_EQ(*up, 1.0) << why;
  std::printf("%zu unique IDs fetched; Prometheus reports sum(flurry_ids_issued_total) = %.0f, up = %.0f\n",
              ids.size(), *issued, *up);
  expect_every_panel_returns_data(prometheus_port);

  prom.signal(SIGTERM);
  const auto prom_code = prom.wait(10'000);
  EXPECT_TRUE(prom_code) << "prometheus did not stop within 10 s of SIGTERM";
  if (!prom_code) {
    prom.signal(SIGKILL);
    prom.wait(testing::exit_timeout_ms);
  }
  server.stop();
}

TEST(Metrics, BadOrTakenMetricsListenExitsNamingTheFlag) {
  const std::string flurryd = testing::env_or_die("FLURRYD");
  TempDir dir("flurry-metrics-flags-");
  const std::string udp_listen = "127.0.0.1:" + std::to_string(testing::free_udp_port());
  struct Case {
    std::string value;
    std::string expected;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"bogus", "ADDR:PORT"},
      {"127.0.0.1", "ADDR:PORT"},
      {"127.0.0.1:0", "1..65535"},
      {"127.0.0.1:70000", "1..65535"},
      {"127.0.0.1:http", "1..65535"},
      {"localhost:9420", "IPv4"},
      {":9420", "ADDR:PORT"},
  };
  // clang-format on
  for (const auto& c : cases) {
    const auto result = testing::run_to_end(
        flurryd, {"--state-dir", dir.path(), "--init", "--listen", udp_listen, "--metrics-listen", c.value});
    EXPECT_EQ(result.exit_code, 2) << c.value << ":\n" << result.output;
    EXPECT_NE(result.output.find("--metrics-listen"), std::string::npos) << c.value << ":\n" << result.output;
    EXPECT_NE(result.output.find(c.expected), std::string::npos) << c.value << ":\n" << result.output;
  }
  // The same from the TOML key.
  std::ofstream(dir.sub("bad.toml")) << "metrics_listen = \"bogus\"\n";
  const auto toml = testing::run_to_end(flurryd, {"--state-dir", dir.path(), "--init", "--listen", udp_listen,
                                                  "--config", dir.sub("bad.toml")});
  EXPECT_EQ(toml.exit_code, 2) << toml.output;
  EXPECT_NE(toml.output.find("--metrics-listen 'bogus'"), std::string::npos) << toml.output;

  // A port another process listens on: non-zero, naming the address, the flag and the errno text.
  const int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof address;
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  const auto busy = testing::run_to_end(
      flurryd, {"--state-dir", dir.path(), "--init", "--listen", udp_listen, "--metrics-listen", taken});
  close(holder);
  EXPECT_NE(busy.exit_code, 0) << busy.output;
  EXPECT_NE(busy.output.find("--metrics-listen " + taken), std::string::npos) << busy.output;
  EXPECT_NE(busy.output.find("in use"), std::string::npos) << busy.output;
}

}  // namespace
}  // namespace flurry
