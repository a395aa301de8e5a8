// control/cluster/cluster_mode.cc — see cluster_mode.h.
#include "control/cluster/cluster_mode.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "base/log.h"

namespace flurry::control::cluster {
namespace {

constexpr std::uint32_t backoff_first_ms = 200;
// A failed claim costs etcd a lease grant and one listing; waiting longer than this between
// attempts only lengthens the time a node serves nothing after etcd is back (the chaos etcd
// scenario measured the 1.6 s and 3.2 s steps of a 5 s cap there).
constexpr std::uint32_t backoff_max_ms = 1000;
// While the clock check waits on peers' stale owner values (their next renew, or their
// lease's end), the answer can change at any moment: look again soon, without backing off.
constexpr std::uint32_t skew_wait_retry_ms = 250;

// While the clock check waits on peers a claim is retried every 250 ms, for up to a lease
// TTL: the first failure is logged, then one line every 5 s, not four a second.
bool log_claim_failure(std::uint64_t now_ns, bool waiting_on_peers, std::uint64_t* last_ns) {
  if (waiting_on_peers && *last_ns != 0 && now_ns - *last_ns < 5'000'000'000ULL) return false;
  *last_ns = now_ns;
  return true;
}

std::uint32_t next_backoff(std::uint32_t backoff_ms) {
  return backoff_ms == 0 ? backoff_first_ms : std::min(backoff_ms * 2, backoff_max_ms);
}

}  // namespace

std::uint32_t claim_retry_ms(std::uint32_t* backoff_ms, bool waiting_on_peers) {
  if (waiting_on_peers) return skew_wait_retry_ms;
  *backoff_ms = next_backoff(*backoff_ms);
  return *backoff_ms;
}

namespace {

MembershipConfig membership_config(const ClusterModeOptions& options) {
  MembershipConfig config;
  config.cluster = options.cluster;
  config.instance_id = options.instance_id;
  config.layout = options.layout;
  config.lease_ttl_s = options.timings.lease_ttl_s;
  config.clock_skew_ms_max = options.clock_skew_ms_max;
  return config;
}

}  // namespace

Result<std::unique_ptr<ClusterMode>> ClusterMode::create(const ClusterModeOptions& options,
                                                         const Clock& clock) {
  const MembershipConfig config = membership_config(options);
  if (Status valid = validate(config); !valid.ok()) return valid;
  std::string joined;
  for (const auto& e : options.endpoints) joined += (joined.empty() ? "" : ",") + e;
  Result<std::vector<std::string>> endpoints = parse_endpoints(joined);
  if (!endpoints.ok()) return endpoints.status();

  EtcdConfig etcd = options.access;
  etcd.endpoints = *endpoints;
  // One token for the three clients (lease, keep-alive, sequences): etcd checks the password
  // once, and the keep-alive never waits on an authentication of its own at start.
  etcd.session = std::make_shared<EtcdSession>();
  etcd.request_timeout_ms = options.timings.etcd_request_timeout_ms;
  etcd.connect_timeout_ms = options.timings.etcd_connect_timeout_ms;
  // The keep-alive may take longer per call: it only has to land within the TTL.
  EtcdConfig keepalive = etcd;
  keepalive.request_timeout_ms = options.timings.keepalive_timeout_ms;

  std::unique_ptr<ClusterMode> mode(new ClusterMode());
  mode->options_ = options;
  mode->options_.endpoints = *endpoints;
  mode->clock_ = &clock;
  Result<std::unique_ptr<EtcdClient>> client = EtcdClient::create(etcd);
  if (!client.ok()) return client.status();
  mode->client_ = std::move(client).value();
  Result<std::unique_ptr<EtcdClient>> keeper_client = EtcdClient::create(keepalive);
  if (!keeper_client.ok()) return keeper_client.status();
  mode->session_ = etcd.session;
  mode->membership_ = std::make_unique<Membership>(*mode->client_, clock, config);
  if (Status made = mode->make_sequence_blocks(etcd); !made.ok()) return made;
  ClusterMode* self = mode.get();  // the keeper stops before the mode goes (stop(), member order)
  mode->keeper_ = std::make_unique<LeaseKeeper>(
      *mode->membership_, std::move(keeper_client).value(),
      [](const std::string& what) { log_warn("{}", what); },
      [self](KvStore& store) { self->look_at_peer_clocks(store); });
  return mode;
}

// The tag of a block reservation names this start (instance id + a random nonce), so a
// restarted process never mistakes an earlier process's put for its own lost one.
Status ClusterMode::make_sequence_blocks(const EtcdConfig& etcd) {
  Result<std::unique_ptr<EtcdClient>> client = EtcdClient::create(etcd);
  if (!client.ok()) return client.status();
  seq_client_ = std::move(client).value();
  std::random_device random;
  char nonce[20];
  std::snprintf(nonce, sizeof nonce, "%08x%08x", random(), random());
  seq_blocks_ =
      std::make_unique<SeqBlocks>(*seq_client_, options_.cluster, options_.instance_id + "." + nonce);
  return {};
}

ClusterMode::~ClusterMode() { stop(); }

Status ClusterMode::claim_at_start(const std::function<bool()>& should_stop) {
  log_info("cluster '{}': claiming a node id from etcd {}{} (instance {}, lease TTL {} s)", options_.cluster,
           client_->endpoint(),
           options_.access.user.empty() ? "" : " as etcd user '" + options_.access.user + "'",
           options_.instance_id, options_.timings.lease_ttl_s);
  std::uint32_t backoff_ms = 0;
  std::uint64_t logged_ns = 0;
  for (std::uint64_t attempt = 1;; ++attempt) {
    const Status claimed = membership_->claim();
    if (claimed.ok()) {
      const LeaseStatus s = membership_->status();
      log_info("cluster '{}': holding node id {} under lease {} (etcd {}); its watermark is {}",
               options_.cluster, s.node_id, s.lease_id, s.endpoint, membership_->floor_t());
      return {};
    }
    if (claimed.code() == StatusCode::refused) return claimed;
    const bool waiting = membership_->waiting_on_peers();
    const std::uint32_t wait_ms = claim_retry_ms(&backoff_ms, waiting);
    if (log_claim_failure(clock_->mono_ns(), waiting, &logged_ns)) {
      log_warn(
          "cluster '{}': no node id yet (attempt {}): {}; serving nothing until one is held, retrying in {} "
          "ms",
          options_.cluster, attempt, claimed.message(), wait_ms);
    }
    // Sleep in short slices so a signal stops the wait promptly.
    for (std::uint32_t slept = 0; slept < wait_ms; slept += 50) {
      if (should_stop()) return Error{"stopped before a node id was held"};
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

Durability& ClusterMode::durability(Durability* local) {
  if (!durability_) durability_ = std::make_unique<ClusterDurability>(local, *membership_);
  return *durability_;
}

void ClusterMode::start_keepalive() { keeper_->start(); }

void ClusterMode::fence_if_lease_expired(WatermarkScheduler& scheduler) {
  if (stopped_.load(std::memory_order_relaxed)) return;
  const ServeState state = scheduler.state();
  if (state == ServeState::fenced || state == ServeState::draining || !membership_->lease_expired()) return;
  log_error("fenced: lease {} expired, node id {} may belong to another member now",
            membership_->status().lease_id, membership_->node_id());
  scheduler.fence();
}

void ClusterMode::tick(WatermarkScheduler& scheduler, std::uint64_t local_floor_t) {
  if (stopped_) return;
  fence_if_lease_expired(scheduler);
  if (scheduler.state() != ServeState::fenced) {
    backoff_ms_ = 0;
    return;
  }
  const std::uint64_t now_ns = clock_->mono_ns();
  if (now_ns < next_claim_ns_) return;
  if (membership_->clone_detected()) remake_instance_id();
  if (const Status claimed = membership_->claim(); !claimed.ok()) {
    const bool waiting = membership_->waiting_on_peers();
    const std::uint32_t wait_ms = claim_retry_ms(&backoff_ms_, waiting);
    next_claim_ns_ = now_ns + std::uint64_t{wait_ms} * 1'000'000;
    if (log_claim_failure(now_ns, waiting, &claim_logged_ns_)) {
      log_warn("fenced, claiming again: {}; next attempt in {} ms", claimed.message(), wait_ms);
    }
    return;
  }
  backoff_ms_ = 0;
  const std::uint64_t floor_t = std::max(local_floor_t, membership_->floor_t());
  log_info("re-claimed: node id {} (watermark {}); serving above {}", membership_->node_id(),
           membership_->floor_t(), floor_t);
  if (const Status reassigned = scheduler.reassign(membership_->node_id(), floor_t); !reassigned.ok()) {
    log_warn("first watermark after the re-claim not durable yet: {}", reassigned.message());
  }
}

// The clock check of a claim, while serving: a drifting clock is seen (metrics, flurryctl
// lease, one warning) before a re-claim refuses it. One owner listing a lease TTL, on the
// keep-alive thread and its connection, after a keep-alive etcd answered: never in the way of
// a watermark renew.
void ClusterMode::look_at_peer_clocks(KvStore& store) {
  const std::uint64_t now_ns = clock_->mono_ns();
  if (now_ns < next_clock_look_ns_ || membership_->status().state != LeaseState::serving ||
      membership_->lease_expired()) {
    return;
  }
  next_clock_look_ns_ = now_ns + std::uint64_t{options_.timings.lease_ttl_s} * 1'000'000'000;
  const Result<bool> beyond = membership_->observe_peer_clocks(store);
  if (!beyond.ok()) return;  // etcd trouble shows in the renew's state already
  if (*beyond && !clock_warned_) {
    const LeaseStatus s = membership_->status();
    log_warn(
        "this node's clock is {} ms from the median of the clocks its {} peers last wrote (allowed: "
        "--clock-skew-ms-max {}); a re-claim would be refused or held up: fix NTP on this host or the peers",
        s.peer_clock_skew_ms, s.peers, options_.clock_skew_ms_max);
  } else if (!*beyond && clock_warned_) {
    log_info("this node's clock is within --clock-skew-ms-max of its peers' again");
  }
  clock_warned_ = *beyond;
}

void ClusterMode::remake_instance_id() {
  std::string error = "no place to keep it";
  std::optional<std::string> fresh;
  if (options_.remake_instance_id) {
    Result<std::string> made = options_.remake_instance_id();
    if (made.ok()) {
      fresh = std::move(made).value();
    } else {
      error = made.message();
    }
  }
  if (!fresh) {
    // Still a new identity for this run; the copied one comes back after a restart.
    std::random_device random;
    char text[33];
    std::snprintf(text, sizeof text, "%08x%08x%08x%08x", random(), random(), random(), random());
    fresh = text;
    log_error(
        "cluster: cannot keep a new instance id ({}); using {} until the next restart, when the copied "
        "state dir's id comes back: give this member its own --state-dir",
        error, *fresh);
  }
  log_error(
      "cluster: this member's state dir was copied from a running member (same instance id '{}'); it is "
      "now instance '{}' and claims another node id",
      membership_->instance_id(), *fresh);
  membership_->set_instance_id(*fresh);
}

void ClusterMode::stop() {
  if (stopped_.exchange(true)) return;
  if (keeper_) keeper_->stop();
  if (membership_) membership_->release();
}

std::string ClusterMode::metrics_text() const {
  const LeaseStatus s = membership_->status();
  std::string out;
  const auto family = [&out](const char* name, const char* type, const char* help) {
    out += std::string("# HELP flurry_") + name + " " + help + "\n# TYPE flurry_" + name + " " + type + "\n";
  };
  family("lease_state", "gauge", "1 for the current cluster lease state.");
  for (const LeaseState state : lease_states) {
    out += "flurry_lease_state{state=\"" + std::string(to_string(state)) + "\"} " +
           (s.state == state ? "1" : "0") + "\n";
  }
  family("lease_ttl_left_seconds", "gauge", "Lease time left, from the last keep-alive answer.");
  out +=
      "flurry_lease_ttl_left_seconds " + std::to_string(static_cast<double>(s.ttl_left_ms) / 1000.0) + "\n";
  family("lease_renew_seconds", "gauge", "Latency of the last acknowledged etcd watermark transaction.");
  out += "flurry_lease_renew_seconds " + std::to_string(static_cast<double>(s.last_renew_latency_us) / 1e6) +
         "\n";
  family("lease_renewals_total", "counter", "etcd watermark transactions, by result.");
  out += "flurry_lease_renewals_total{result=\"ok\"} " + std::to_string(s.renewals) + "\n";
  out += "flurry_lease_renewals_total{result=\"failed\"} " + std::to_string(s.renew_failures) + "\n";
  family("lease_keepalive_failures_total", "counter",
         "Lease keep-alives without an answer, or finding the lease gone.");
  out += "flurry_lease_keepalive_failures_total " + std::to_string(s.keepalive_failures) + "\n";
  family("lease_node_ids_lost_total", "counter", "Node ids lost to another member (fenced).");
  out += "flurry_lease_node_ids_lost_total " + std::to_string(s.node_ids_lost) + "\n";
  family("lease_claims_total", "counter", "Node ids claimed.");
  out += "flurry_lease_claims_total " + std::to_string(s.claims) + "\n";
  family("lease_peers", "gauge", "Other members holding node ids, at the last look at their clocks.");
  out += "flurry_lease_peers " + std::to_string(s.peers) + "\n";
  family("lease_peer_clock_skew_seconds", "gauge",
         "This node's wall clock minus the median of the clocks its peers last wrote (they lag by up to "
         "one renew); 0 without peers.");
  out += "flurry_lease_peer_clock_skew_seconds " +
         std::to_string(static_cast<double>(s.peer_clock_skew_ms) / 1000.0) + "\n";
  family("etcd_endpoint", "gauge", "1 for the etcd endpoint in use.");
  out += "flurry_etcd_endpoint{url=\"" + s.endpoint + "\"} 1\n";
  if (!options_.access.user.empty()) {
    const auto [all, again] = authentications();
    family(
        "etcd_authentications_total", "counter",
        "Tokens got from etcd as --etcd-user (one shared by flurryd's etcd clients): the first, and new ones "
        "after etcd refused the token in use (expired after --auth-token-ttl, or etcd restarted).");
    out += "flurry_etcd_authentications_total{reason=\"first\"} " + std::to_string(all - again) + "\n";
    out += "flurry_etcd_authentications_total{reason=\"token_refused\"} " + std::to_string(again) + "\n";
  }
  return out;
}

std::pair<std::uint64_t, std::uint64_t> ClusterMode::authentications() const {
  return {session_->authentications.load(std::memory_order_relaxed),
          session_->reauthentications.load(std::memory_order_relaxed)};
}

nlohmann::json ClusterMode::lease_json() const {
  const LeaseStatus s = membership_->status();
  const auto [authentications_all, authentications_again] = authentications();
  return {
      {"mode", "cluster"},
      {"cluster", options_.cluster},
      {"instance_id", membership_->instance_id()},
      {"state", std::string(to_string(s.state))},
      {"holds_node", s.holds_node},
      {"node_id", s.node_id},
      {"lease_id", std::to_string(s.lease_id)},
      {"lease_ttl_s", s.lease_ttl_s},
      {"ttl_left_ms", s.ttl_left_ms},
      {"last_renew_latency_us", s.last_renew_latency_us},
      {"durable_watermark_t", s.durable_watermark_t},
      {"etcd_endpoint", s.endpoint},
      {"claims", s.claims},
      {"renewals", s.renewals},
      {"renew_failures", s.renew_failures},
      {"keepalive_failures", s.keepalive_failures},
      {"node_ids_lost", s.node_ids_lost},
      {"peers", s.peers},
      {"peer_clock_skew_ms", s.peer_clock_skew_ms},
      {"last_error", s.last_error},
      {"etcd_user", options_.access.user},
      {"etcd_tls", s.endpoint.rfind("https://", 0) == 0},
      {"etcd_authentications", authentications_all},
      {"etcd_reauthentications", authentications_again},
  };
}

std::uint64_t ClusterMode::serve_until_unix_ms() const {
  const std::uint64_t deadline_ns = membership_->lease_deadline_mono_ns();
  const std::uint64_t now_ns = clock_->mono_ns();
  const std::uint64_t margin_ns = sequence_lease_margin_ms() * 1'000'000;
  if (deadline_ns == 0 || deadline_ns <= now_ns + margin_ns) return 0;
  return clock_->wall_ms() + (deadline_ns - now_ns - margin_ns) / 1'000'000;
}

}  // namespace flurry::control::cluster
