// control/cluster/membership.cc — see membership.h.
#include "control/cluster/membership.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>

namespace flurry::control::cluster {
namespace {

// How a KvStore failure reads to claim(): unreachable etcd is worth retrying, a store that
// answers no is not.
StatusCode claim_code(const Status& failure) {
  return failure.code() == StatusCode::unavailable ? StatusCode::unavailable : StatusCode::refused;
}

bool parse_u64(std::string_view text, std::uint64_t* value) {
  if (text.empty()) return false;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), *value);
  return parsed.ec == std::errc() && parsed.ptr == text.data() + text.size();
}

// Everything that changes what a node id and a time field mean; core bits only when they
// are carved from the node field (from the sequence, each member may choose its own).
std::string layout_identity(const proto::Layout& layout) {
  std::string text = std::to_string(layout.time_bits) + "/" + std::to_string(layout.node_bits) + "/" +
                     std::to_string(layout.sequence_bits) +
                     " unit_ms=" + std::to_string(layout.time_unit_ms) +
                     " epoch_ms=" + std::to_string(layout.epoch_ms);
  if (layout.core_from == proto::CoreBitsFrom::node) {
    text += " core_bits_from_node=" + std::to_string(layout.core_bits);
  }
  return text;
}

}  // namespace

std::string_view to_string(LeaseState state) {
  switch (state) {
    case LeaseState::claiming:
      return "claiming";
    case LeaseState::serving:
      return "serving";
    case LeaseState::degraded_etcd:
      return "degraded_etcd";
    case LeaseState::fenced:
      return "fenced";
  }
  return "unknown";
}

Status validate(const MembershipConfig& config) {
  if (config.cluster.empty() || config.cluster.size() > cluster_name_size_max) {
    return Error{"--cluster must name the cluster in 1.." + std::to_string(cluster_name_size_max) +
                 " characters"};
  }
  for (const char c : config.cluster) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok)
      return Error{"--cluster '" + config.cluster + "' may only hold letters, digits, '.', '_' and '-'"};
  }
  if (config.instance_id.empty() || config.instance_id.size() > 128) {
    return Error{"the instance id (state directory identity file) must be 1..128 characters"};
  }
  if (config.lease_ttl_s < lease_ttl_s_min || config.lease_ttl_s > lease_ttl_s_max) {
    return Error{"--lease-ttl-s " + std::to_string(config.lease_ttl_s) + " is out of bounds (" +
                 std::to_string(lease_ttl_s_min) + ".." + std::to_string(lease_ttl_s_max) + ")"};
  }
  if (config.clock_skew_ms_max < clock_skew_ms_max_lower ||
      config.clock_skew_ms_max > clock_skew_ms_max_upper) {
    return Error{"--clock-skew-ms-max " + std::to_string(config.clock_skew_ms_max) + " is out of bounds (" +
                 std::to_string(clock_skew_ms_max_lower) + ".." + std::to_string(clock_skew_ms_max_upper) +
                 ")"};
  }
  if (config.claim_attempts_max == 0) return Error{"claim_attempts_max must be at least 1"};
  return {};
}

std::string encode_owner_value(const OwnerValue& value) {
  return nlohmann::json{{"instance", value.instance_id}, {"clock_ms", value.clock_ms}}.dump();
}

bool decode_owner_value(std::string_view text, OwnerValue* value) {
  const auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return false;
  const auto instance = parsed.find("instance");
  const auto clock = parsed.find("clock_ms");
  if (instance == parsed.end() || !instance->is_string() || clock == parsed.end() ||
      !clock->is_number_unsigned()) {
    return false;
  }
  value->instance_id = instance->get<std::string>();
  value->clock_ms = clock->get<std::uint64_t>();
  return true;
}

std::int64_t clock_skew_ms(std::uint64_t mine_ms, std::vector<std::uint64_t> peers_ms) {
  if (peers_ms.empty()) return 0;
  std::sort(peers_ms.begin(), peers_ms.end());
  const std::size_t n = peers_ms.size();
  // Median; for an even count the mean of the middle two (computed without overflow).
  const std::uint64_t low = peers_ms[(n - 1) / 2];
  const std::uint64_t high = peers_ms[n / 2];
  const std::uint64_t median = low + (high - low) / 2;
  return static_cast<std::int64_t>(mine_ms) - static_cast<std::int64_t>(median);
}

Membership::Membership(KvStore& store, const Clock& clock, MembershipConfig config)
    : store_(store),
      clock_(clock),
      config_(std::move(config)),
      layout_text_(layout_identity(config_.layout)) {
  status_.lease_ttl_s = config_.lease_ttl_s;
  status_.endpoint = store_.endpoint();
}

std::string Membership::owner_key(std::uint32_t node) const {
  return "/flurry/" + config_.cluster + "/owner/" + std::to_string(node);
}
std::string Membership::watermark_key(std::uint32_t node) const {
  return "/flurry/" + config_.cluster + "/watermark/" + std::to_string(node);
}
std::string Membership::layout_key() const { return "/flurry/" + config_.cluster + "/layout"; }
std::string Membership::owners_prefix() const { return "/flurry/" + config_.cluster + "/owner/"; }

void Membership::set_error_locked(const std::string& error) { status_.last_error = error; }

void Membership::update_state_locked() {
  if (!status_.holds_node) return;  // claiming / fenced are set where they happen
  status_.state = renew_failing_ || keepalive_failing_ ? LeaseState::degraded_etcd : LeaseState::serving;
}

std::uint32_t Membership::node_id() const {
  std::lock_guard lock(mutex_);
  return status_.node_id;
}
bool Membership::waiting_on_peers() const {
  std::lock_guard lock(mutex_);
  return waiting_on_peers_;
}
std::uint64_t Membership::floor_t() const {
  std::lock_guard lock(mutex_);
  return floor_t_;
}
bool Membership::lease_expired() const {
  std::lock_guard lock(mutex_);
  return lease_expired_locked();
}

bool Membership::lease_expired_locked() const {
  if (lease_expired_) return true;
  // The lease's own deadline, on the monotonic clock, counted from when the last successful
  // grant or keep-alive was *sent* (etcd restarted the TTL after that): a node stops issuing
  // by itself when it passes, before it hears from etcd.
  if (status_.lease_id == 0 || ttl_answer_mono_ns_ == 0) return false;
  const std::uint64_t deadline_ns =
      ttl_answer_mono_ns_ + static_cast<std::uint64_t>(ttl_answer_s_) * 1'000'000'000ULL;
  return clock_.mono_ns() >= deadline_ns;
}

std::uint64_t Membership::lease_deadline_mono_ns() const {
  std::lock_guard lock(mutex_);
  if (lease_expired_ || status_.lease_id == 0 || ttl_answer_mono_ns_ == 0) return 0;
  return ttl_answer_mono_ns_ + static_cast<std::uint64_t>(ttl_answer_s_) * 1'000'000'000ULL;
}

std::string Membership::instance_id() const {
  std::lock_guard lock(mutex_);
  return config_.instance_id;
}

bool Membership::clone_detected() const {
  std::lock_guard lock(mutex_);
  return clone_detected_;
}

void Membership::set_instance_id(const std::string& instance_id) {
  std::lock_guard lock(mutex_);
  config_.instance_id = instance_id;
  clone_detected_ = false;
}

LeaseStatus Membership::status() const {
  std::lock_guard lock(mutex_);
  LeaseStatus copy = status_;
  if (copy.lease_id != 0 && ttl_answer_mono_ns_ != 0) {
    const auto elapsed_ms = static_cast<std::int64_t>((clock_.mono_ns() - ttl_answer_mono_ns_) / 1'000'000);
    copy.ttl_left_ms = std::max<std::int64_t>(0, ttl_answer_s_ * 1000 - elapsed_ms);
  }
  return copy;
}

Status Membership::claim_failed(Status failure) {
  std::lock_guard lock(mutex_);
  set_error_locked(failure.message());
  return failure;
}

Status Membership::ensure_lease() {
  std::int64_t old_lease = 0;
  {
    std::lock_guard lock(mutex_);
    if (status_.lease_id != 0 && !lease_expired_locked()) return {};
    old_lease = status_.lease_id;
  }
  if (old_lease != 0) (void)store_.lease_revoke(old_lease);  // best effort: it owns no key of mine
  const std::uint64_t sent_ns = clock_.mono_ns();
  const Result<LeaseGrant> grant = store_.lease_grant(config_.lease_ttl_s);
  std::lock_guard lock(mutex_);
  status_.endpoint = store_.endpoint();
  if (!grant.ok()) {
    set_error_locked("lease grant: " + grant.message());
    status_.lease_id = 0;
    return Error{"cannot get an etcd lease: " + grant.message(), claim_code(grant.status())};
  }
  status_.lease_id = grant->lease_id;
  lease_expired_ = false;
  ttl_answer_s_ = grant->ttl_s;
  ttl_answer_mono_ns_ = sent_ns;
  return {};
}

Status Membership::check_layout() {
  {
    std::lock_guard lock(mutex_);
    if (layout_checked_) return {};
  }
  Txn txn;
  txn.compares.push_back({layout_key(), Compare::Target::create_revision, 0, {}});
  txn.success.push_back(Op::put(layout_key(), layout_text_));
  txn.failure.push_back(Op::get(layout_key()));
  const Result<TxnResult> result = store_.txn(txn);
  if (!result.ok()) {
    return Error{"cannot check the cluster's layout in etcd: " + result.message(),
                 claim_code(result.status())};
  }
  if (!result->succeeded) {
    const auto& kvs = result->results.at(0);
    const std::string stored = kvs.empty() ? std::string() : kvs.front().value;
    if (stored != layout_text_) {
      return Error{"cluster '" + config_.cluster + "' uses the ID layout '" + stored +
                       "' but this node has '" + layout_text_ +
                       "': start it with the cluster's --layout and --epoch (IDs of two layouts collide)",
                   StatusCode::refused};
    }
  }
  std::lock_guard lock(mutex_);
  layout_checked_ = true;
  return {};
}

// Who holds what, from one listing of the owner keys: my own node ids (a restart inside the
// TTL, or a clone), the peers' clocks, and every node id that is taken. Pure.
Membership::OwnerListing Membership::classify_owners(std::vector<KeyValue> kvs) const {
  OwnerListing listing;
  const std::uint32_t node_max = config_.layout.node_id_max();
  const std::string prefix = owners_prefix();
  for (KeyValue& kv : kvs) {
    std::uint64_t node = 0;
    if (kv.key.compare(0, prefix.size(), prefix) != 0 ||
        !parse_u64(std::string_view(kv.key).substr(prefix.size()), &node) || node > node_max) {
      continue;  // not a node of this layout; never ours to take
    }
    OwnerValue owner;
    if (decode_owner_value(kv.value, &owner)) {
      if (owner.instance_id == config_.instance_id) {
        listing.mine.push_back(static_cast<std::uint32_t>(node));
      } else {
        listing.peers.push_back({static_cast<std::uint32_t>(node), kv.mod_revision, owner.clock_ms});
      }
    }
    listing.owners.emplace(static_cast<std::uint32_t>(node), std::move(kv));
  }
  return listing;
}

// My own node ids first (restart inside the TTL), then the lowest free ones. Pure.
std::vector<Membership::Candidate> Membership::pick_candidates(const OwnerListing& listing) const {
  const std::uint32_t node_max = config_.layout.node_id_max();
  std::vector<Candidate> candidates;
  for (std::uint32_t node : listing.mine) candidates.push_back({node, listing.owners.at(node).mod_revision});
  for (std::uint64_t node = 0; node <= node_max && candidates.size() < config_.claim_attempts_max; ++node) {
    if (listing.owners.count(static_cast<std::uint32_t>(node)) == 0) {
      candidates.push_back({static_cast<std::uint32_t>(node), 0});
    }
  }
  if (candidates.size() > config_.claim_attempts_max) candidates.resize(config_.claim_attempts_max);
  return candidates;
}

Result<Membership::OwnerListing> Membership::list_owners() {
  Txn list;
  list.success.push_back(Op::get_prefix(owners_prefix()));
  Result<TxnResult> listed = store_.txn(list);
  if (!listed.ok()) {
    {
      std::lock_guard lock(mutex_);
      set_error_locked(listed.message());
    }
    return Error{"cannot list the cluster's node owners: " + listed.message(), claim_code(listed.status())};
  }
  return classify_owners(std::move(listed->results.at(0)));
}

Status Membership::refuse_skew(std::int64_t skew, std::size_t count) {
  const std::uint64_t skew_abs = static_cast<std::uint64_t>(skew < 0 ? -skew : skew);
  return claim_failed(
      Error{"this node's clock is " + std::to_string(skew_abs) + " ms " + (skew > 0 ? "ahead of" : "behind") +
                " the median of its " + std::to_string(count) + " live peers in cluster '" + config_.cluster +
                "' (allowed: --clock-skew-ms-max " + std::to_string(config_.clock_skew_ms_max) +
                "): fix NTP on this host, then start again",
            StatusCode::refused});
}

// Clock sanity against the live peers (their owner values, refreshed on every renew).
// Recorded peer clocks only ever lag the peers' real clocks, so "behind" is refused at once,
// but "ahead" may be an artefact of stale values: it is refused only if it holds against
// values composed after the first suspicion's look (a peer's second renewal since), less the
// time since; it passes on the first renewal if that is within the limit (see the header).
Status Membership::check_skew(const std::vector<Peer>& peers, std::uint64_t looked_ns) {
  const std::uint64_t now_ms = clock_.wall_ms();
  const auto skew_ms_limit = static_cast<std::int64_t>(config_.clock_skew_ms_max);
  std::vector<std::uint64_t> clocks;
  for (const Peer& p : peers) clocks.push_back(p.clock_ms);
  const std::int64_t skew = clock_skew_ms(now_ms, clocks);
  if (skew < -skew_ms_limit) return refuse_skew(skew, peers.size());
  if (skew <= skew_ms_limit) return {};
  std::unique_lock lock(mutex_);
  if (clock_skew_ms(now_ms, aged_clocks_locked(peers)) <= skew_ms_limit) return {};
  if (!skew_suspected_) {
    skew_suspected_ = true;
    waiting_on_peers_ = true;
    skew_suspect_mono_ns_ = looked_ns;
    skew_suspect_revisions_.clear();
    skew_renewed_revisions_.clear();
    for (const Peer& p : peers) skew_suspect_revisions_[p.node] = p.mod_revision;
    return Error{"this node's clock is " + std::to_string(skew) +
                     " ms ahead of the last clocks reported by " + std::to_string(peers.size()) +
                     " peers; they may be stale, checking again after the peers renew",
                 StatusCode::unavailable};
  }
  // Only values written since the first look count, each at most `elapsed` old if composed
  // after it: `fresh` holds every value committed after the look, `composed_after` those
  // written after a newer value of the same peer was seen (its owner writes follow each other).
  const auto elapsed_ms = static_cast<std::int64_t>((clock_.mono_ns() - skew_suspect_mono_ns_) / 1'000'000);
  std::vector<std::uint64_t> fresh;
  std::vector<std::uint64_t> composed_after;
  for (const Peer& p : peers) {
    const auto looked = skew_suspect_revisions_.find(p.node);
    if (looked != skew_suspect_revisions_.end() && looked->second == p.mod_revision) continue;
    fresh.push_back(p.clock_ms);
    const auto renewed = skew_renewed_revisions_.try_emplace(p.node, p.mod_revision).first;
    if (renewed->second != p.mod_revision) composed_after.push_back(p.clock_ms);
  }
  if (fresh.empty()) {
    waiting_on_peers_ = true;
    return Error{"this node's clock is " + std::to_string(skew) +
                     " ms ahead of the last clocks reported by " + std::to_string(peers.size()) +
                     " peers; waiting for them to renew (or their leases to end)",
                 StatusCode::unavailable};
  }
  const std::int64_t fresh_skew = clock_skew_ms(now_ms, fresh) - elapsed_ms;
  if (fresh_skew <= skew_ms_limit) return {};
  if (composed_after.empty()) {
    waiting_on_peers_ = true;
    return Error{"this node's clock is " + std::to_string(fresh_skew) + " ms ahead of " +
                     std::to_string(fresh.size()) +
                     " peers' renewed clocks, which may have been read before this node looked; waiting "
                     "for their next renewal",
                 StatusCode::unavailable};
  }
  lock.unlock();
  const std::int64_t composed_skew = clock_skew_ms(now_ms, composed_after) - elapsed_ms;
  if (composed_skew > skew_ms_limit) return refuse_skew(composed_skew, composed_after.size());
  return {};
}

void Membership::note_etcd_wrote_locked(std::int64_t revision) {
  wrote_mono_ns_ = clock_.mono_ns();
  wrote_revision_ = revision;
}

void Membership::note_clock_checked_locked(std::size_t peers) {
  if (peers == 0) return;  // nothing was compared
  clock_checked_ = true;
  checked_mono_ns_ = clock_.mono_ns();
  checked_clock_offset_ms_ = clock_offset_ms();
}

std::optional<Membership::Candidate> Membership::last_node_candidate(const OwnerListing& listing) const {
  std::uint32_t node = 0;
  {
    std::lock_guard lock(mutex_);
    if (!held_before_) return std::nullopt;
    node = status_.node_id;
  }
  const auto owner = listing.owners.find(node);
  if (owner == listing.owners.end()) return Candidate{node, 0};  // free (its old lease revoked)
  if (std::find(listing.mine.begin(), listing.mine.end(), node) != listing.mine.end()) {
    return Candidate{node, owner->second.mod_revision};
  }
  return std::nullopt;  // another member holds it now
}

std::int64_t Membership::clock_offset_ms() const {
  return static_cast<std::int64_t>(clock_.wall_ms()) -
         static_cast<std::int64_t>(clock_.mono_ns() / 1'000'000);
}

bool Membership::clock_unstepped() const {
  std::lock_guard lock(mutex_);
  if (!clock_checked_) return false;
  // Recent: a clock that slews or drifts moves with the monotonic clock, so only a short time
  // since the last pass bounds how far it went (500 ppm of drift is 20 ms in 40 s).
  const std::uint64_t recent_ns = static_cast<std::uint64_t>(config_.lease_ttl_s) * 4'000'000'000ULL;
  if (clock_.mono_ns() - checked_mono_ns_ > recent_ns) return false;
  const std::int64_t step = clock_offset_ms() - checked_clock_offset_ms_;
  const auto half_limit = static_cast<std::int64_t>(config_.clock_skew_ms_max / 2);
  return step <= half_limit && step >= -half_limit;
}

// The peers' recorded clocks as lower bounds of their clocks now. A value whose revision is
// not above my last acknowledged write was written before I heard that write acknowledged,
// `since` ms ago: its peer's clock has moved on by at least `since`. So a skew measured
// against these is still at least the real one, and within the limit it is staleness, however
// old the values (after an etcd outage every value is stale and none is renewed until some
// member holds a node id again: waiting for fresh ones kept a whole cluster dark until the old
// leases ended). A value newer than my last write (a peer that kept renewing while only I was
// cut off) counts as it stands.
std::vector<std::uint64_t> Membership::aged_clocks_locked(const std::vector<Peer>& peers) const {
  const std::uint64_t since_ms = wrote_mono_ns_ == 0 ? 0 : (clock_.mono_ns() - wrote_mono_ns_) / 1'000'000;
  std::vector<std::uint64_t> clocks;
  for (const Peer& p : peers) {
    clocks.push_back(p.clock_ms + (wrote_mono_ns_ != 0 && p.mod_revision <= wrote_revision_ ? since_ms : 0));
  }
  return clocks;
}

Result<bool> Membership::observe_peer_clocks(KvStore& store) {
  Txn list;
  list.success.push_back(Op::get_prefix(owners_prefix()));
  Result<TxnResult> listed = store.txn(list);
  if (!listed.ok()) return listed.status();
  // Under the lock: classify_owners reads the instance id, which the renew thread may change
  // (set_instance_id), and the last write is the renew thread's too.
  std::lock_guard lock(mutex_);
  const OwnerListing listing = classify_owners(std::move(listed->results.at(0)));
  // Aged as in the claim's check: the reading overstates "ahead" by less than the values' lag
  // (up to one renew interval).
  const std::vector<std::uint64_t> clocks = aged_clocks_locked(listing.peers);
  const std::int64_t skew = clock_skew_ms(clock_.wall_ms(), clocks);
  status_.peer_clock_skew_ms = skew;
  status_.peers = clocks.size();
  const auto limit = static_cast<std::int64_t>(config_.clock_skew_ms_max);
  const bool beyond = skew > limit || skew < -limit;
  if (beyond) {
    clock_checked_ = false;  // found wrong: no take-back on an earlier pass
  } else {
    note_clock_checked_locked(clocks.size());
  }
  return beyond;
}

Status Membership::refuse_all_taken() {
  const std::uint32_t node_max = config_.layout.node_id_max();
  return claim_failed(Error{"all " + std::to_string(std::uint64_t{node_max} + 1) + " node ids of cluster '" +
                                config_.cluster + "' are taken: the layout has " +
                                std::to_string(config_.layout.node_id_bits()) +
                                " node id bits (node ids 0.." + std::to_string(node_max) +
                                "); stop a member, or use a layout with more node bits (--layout T/N/S)",
                            StatusCode::refused});
}

Status Membership::claim() {
  {
    std::lock_guard lock(mutex_);
    status_.state = LeaseState::claiming;
    status_.holds_node = false;
    waiting_on_peers_ = false;
  }
  if (Status leased = ensure_lease(); !leased.ok()) return leased;
  if (Status checked = check_layout(); !checked.ok()) return claim_failed(std::move(checked));
  std::int64_t lease_id = 0;
  {
    std::lock_guard lock(mutex_);
    lease_id = status_.lease_id;
  }
  const std::uint64_t looked_ns = clock_.mono_ns();
  const Result<OwnerListing> listing = list_owners();
  if (!listing.ok()) return listing.status();
  std::vector<Candidate> candidates = pick_candidates(*listing);
  if (Status sane = check_skew(listing->peers, looked_ns); !sane.ok()) {
    // Suspected "ahead" (not refused): this process may still take back the node id it held
    // last, if no one else holds it now and its clock passed a check against peers recently
    // (within 4 lease TTLs) and has not stepped since: it then goes on as it served. Every
    // member fenced by one short etcd outage does so at once, and its fresh value lets the
    // others check against it.
    const std::optional<Candidate> own = last_node_candidate(*listing);
    if (sane.code() != StatusCode::unavailable || !own || !clock_unstepped()) return sane;
    candidates = {*own};
  } else {
    std::lock_guard lock(mutex_);
    note_clock_checked_locked(listing->peers.size());
  }
  if (candidates.empty()) return refuse_all_taken();
  const std::string my_value = encode_owner_value({config_.instance_id, clock_.wall_ms()});
  for (const Candidate& candidate : candidates) {
    if (std::optional<Status> done = try_claim(candidate, lease_id, my_value)) return *done;
  }
  return Error{"every candidate node id was taken by another member meanwhile; trying again",
               StatusCode::unavailable};
}

std::optional<Status> Membership::try_claim(const Candidate& candidate, std::int64_t lease_id,
                                            const std::string& my_value) {
  const std::string owner = owner_key(candidate.node);
  const std::string watermark = watermark_key(candidate.node);
  Txn txn;
  if (candidate.mod_revision == 0) {
    txn.compares.push_back({owner, Compare::Target::create_revision, 0, {}});
  } else {
    txn.compares.push_back({owner, Compare::Target::mod_revision, candidate.mod_revision, {}});
  }
  txn.success = {Op::put(owner, my_value, lease_id), Op::get(owner), Op::get(watermark)};
  txn.failure = {Op::get(owner), Op::get(watermark)};
  const Result<TxnResult> r = store_.txn(txn);
  if (!r.ok()) {
    std::lock_guard lock(mutex_);
    set_error_locked(r.message());
    status_.endpoint = store_.endpoint();
    // not_found: the lease ran out while claiming; take a fresh one next time and retry.
    if (r.code() == StatusCode::not_found) lease_expired_ = true;
    const StatusCode code =
        r.code() == StatusCode::not_found ? StatusCode::unavailable : claim_code(r.status());
    return Error{"cannot claim node id " + std::to_string(candidate.node) + ": " + r.message(), code};
  }
  const std::vector<KeyValue>& owner_kvs = r->succeeded ? r->results.at(1) : r->results.at(0);
  const std::vector<KeyValue>& watermark_kvs = r->succeeded ? r->results.at(2) : r->results.at(1);
  // A compare that failed because an earlier, unanswered attempt of mine already created
  // the key under my lease is a success.
  const bool held = !owner_kvs.empty() && owner_kvs.front().lease == lease_id;
  if (!held) return std::nullopt;
  std::uint64_t floor = 0;
  if (!watermark_kvs.empty() && !parse_u64(watermark_kvs.front().value, &floor)) {
    release();
    return claim_failed(
        Error{"watermark key " + watermark + " holds '" + watermark_kvs.front().value +
                  "', not a time field: restore it from a backup (deleting it may reissue IDs)",
              StatusCode::refused});
  }
  std::lock_guard lock(mutex_);
  return hold_locked(candidate, owner_kvs.front(), watermark_kvs, floor);
}

// The claim transaction made the node id mine: serve above `floor`.
Status Membership::hold_locked(const Candidate& candidate, const KeyValue& owner,
                               const std::vector<KeyValue>& watermark_kvs, std::uint64_t floor) {
  status_.holds_node = true;
  renew_failing_ = false;
  keepalive_failing_ = false;
  update_state_locked();
  status_.node_id = candidate.node;
  status_.durable_watermark_t = floor;
  status_.endpoint = store_.endpoint();
  status_.last_error.clear();
  ++status_.claims;
  skew_suspected_ = false;
  waiting_on_peers_ = false;
  held_before_ = true;
  note_etcd_wrote_locked(owner.mod_revision);
  create_revision_ = owner.create_revision;
  watermark_mod_revision_ = watermark_kvs.empty() ? 0 : watermark_kvs.front().mod_revision;
  floor_t_ = floor;
  attempted_watermark_t_ = floor;
  return {};
}

// What one renew() writes, and the versions it must find in etcd to write it.
struct Membership::RenewTarget {
  std::uint32_t node = 0;
  std::int64_t lease_id = 0;
  std::int64_t create_revision = 0;
  std::int64_t watermark_revision = 0;
  std::uint64_t watermark_t = 0;
};

Status Membership::renew(std::uint64_t watermark_t) {
  constexpr int attempts_max = 2;  // one retry after the watermark moved under us
  RenewTarget target;
  {
    std::lock_guard lock(mutex_);
    if (!status_.holds_node) return Error{"no node id is held", StatusCode::lost};
    target.node = status_.node_id;
    target.lease_id = status_.lease_id;
    target.create_revision = create_revision_;
    target.watermark_revision = watermark_mod_revision_;
    // Never lower than anything sent before: an unanswered write may have landed.
    target.watermark_t = attempted_watermark_t_ = std::max(watermark_t, attempted_watermark_t_);
  }
  const std::uint64_t start_ns = clock_.mono_ns();
  for (int attempt = 0; attempt < attempts_max; ++attempt) {
    if (std::optional<Status> done = renew_once(target, start_ns)) return *done;
  }
  std::lock_guard lock(mutex_);
  return renew_failed_locked("watermark key " + watermark_key(target.node) + " kept changing under node " +
                             std::to_string(target.node) + "; is another process writing it?");
}

// One renew transaction: only if the owner key is still the one I created under my lease,
// and the watermark is the version I last saw (a delayed, older renew must never lower it).
// nullopt: still mine, but the watermark moved; *target now holds what to try next.
std::optional<Status> Membership::renew_once(RenewTarget& target, std::uint64_t start_ns) {
  const std::string owner = owner_key(target.node);
  const std::string watermark = watermark_key(target.node);
  Txn txn;
  txn.compares.push_back({owner, Compare::Target::lease, target.lease_id, {}});
  txn.compares.push_back({owner, Compare::Target::create_revision, target.create_revision, {}});
  txn.compares.push_back({watermark, Compare::Target::mod_revision, target.watermark_revision, {}});
  txn.success = {
      Op::put(watermark, std::to_string(target.watermark_t)),
      Op::put(owner, encode_owner_value({config_.instance_id, clock_.wall_ms()}), target.lease_id)};
  txn.failure = {Op::get(owner), Op::get(watermark)};
  const Result<TxnResult> r = store_.txn(txn);
  const std::uint64_t latency_us = (clock_.mono_ns() - start_ns) / 1000;
  std::lock_guard lock(mutex_);
  status_.endpoint = store_.endpoint();
  if (!status_.holds_node || status_.node_id != target.node) {
    return Error{"node id " + std::to_string(target.node) + " was given up meanwhile", StatusCode::lost};
  }
  if (!r.ok()) {
    return renew_failed_locked("watermark renew for node " + std::to_string(target.node) +
                               " failed: " + r.message());
  }
  if (r->succeeded) {
    ++status_.renewals;
    note_etcd_wrote_locked(r->revision);
    status_.last_renew_latency_us = latency_us;
    status_.durable_watermark_t = target.watermark_t;
    watermark_mod_revision_ = r->revision;  // the put above made this revision
    renew_failing_ = false;
    update_state_locked();
    return Status{};
  }
  const std::vector<KeyValue>& owner_kvs = r->results.at(0);
  const bool still_mine = !owner_kvs.empty() && owner_kvs.front().lease == target.lease_id &&
                          owner_kvs.front().create_revision == target.create_revision;
  if (!still_mine) return lose_node_locked(target.node, owner_kvs);
  // Still mine, but the watermark is not the version I last saw: re-read, never go below.
  const std::vector<KeyValue>& watermark_kvs = r->results.at(1);
  target.watermark_revision = watermark_kvs.empty() ? 0 : watermark_kvs.front().mod_revision;
  std::uint64_t stored = 0;
  if (!watermark_kvs.empty() && parse_u64(watermark_kvs.front().value, &stored)) {
    target.watermark_t = std::max(target.watermark_t, stored);
    attempted_watermark_t_ = std::max(attempted_watermark_t_, target.watermark_t);
  }
  watermark_mod_revision_ = target.watermark_revision;
  return std::nullopt;
}

Status Membership::renew_failed_locked(const std::string& why) {
  ++status_.renew_failures;
  renew_failing_ = true;
  update_state_locked();
  set_error_locked(why);
  return Error{why, StatusCode::unavailable};
}

// The renew found my owner key gone or held by someone else: the node id is lost.
Status Membership::lose_node_locked(std::uint32_t node, const std::vector<KeyValue>& owner_kvs) {
  std::string who = "its owner key is gone (lease expired)";
  bool cloned = false;
  if (!owner_kvs.empty()) {
    OwnerValue other;
    const KeyValue& kv = owner_kvs.front();
    const bool decoded = decode_owner_value(kv.value, &other);
    // My own instance id under another lease while I am alive: another process runs with a
    // copy of my state dir (a cloned VM or volume) and re-owned "its" node id.
    cloned = decoded && other.instance_id == config_.instance_id;
    who =
        cloned
            ? "another process with this member's own instance id '" + other.instance_id +
                  "' took it under lease " + std::to_string(kv.lease) +
                  ": the state dir was copied from this member (a cloned VM or volume); this member takes a "
                  "new instance id and claims another node id, so the two stop taking it from each other"
            : "instance '" + (decoded ? other.instance_id : std::string("?")) + "' holds it under lease " +
                  std::to_string(kv.lease);
  }
  clone_detected_ = cloned;
  const std::string why = "node id " + std::to_string(node) + " lost: " + who;
  set_error_locked(why);
  status_.holds_node = false;
  status_.state = LeaseState::fenced;
  ++status_.node_ids_lost;
  lease_expired_ = true;  // take a fresh lease for the next claim
  return Error{why, StatusCode::lost};
}

Status Membership::keepalive(KvStore& store) {
  std::int64_t lease_id = 0;
  {
    std::lock_guard lock(mutex_);
    lease_id = status_.lease_id;
    if (lease_id == 0 || lease_expired_) return {};  // nothing to keep alive
  }
  const std::uint64_t sent_ns = clock_.mono_ns();
  const Result<std::int64_t> ttl_s = store.lease_keepalive(lease_id);
  std::lock_guard lock(mutex_);
  if (status_.lease_id != lease_id) return {};  // re-claimed meanwhile
  if (ttl_s.ok()) {
    ttl_answer_s_ = *ttl_s;
    ttl_answer_mono_ns_ = sent_ns;
    keepalive_failing_ = false;
    update_state_locked();
    return {};
  }
  ++status_.keepalive_failures;
  if (ttl_s.code() == StatusCode::not_found) {
    lease_expired_ = true;
    set_error_locked("keepalive: lease " + std::to_string(lease_id) + " expired");
  } else {
    set_error_locked("keepalive: " + ttl_s.message());
    keepalive_failing_ = true;
    update_state_locked();
  }
  return Error{"lease keepalive: " + ttl_s.message(), ttl_s.code()};
}

void Membership::release() {
  std::int64_t lease_id = 0;
  {
    std::lock_guard lock(mutex_);
    lease_id = status_.lease_id;
    status_.lease_id = 0;
    status_.holds_node = false;
    status_.state = LeaseState::fenced;
  }
  if (lease_id != 0) (void)store_.lease_revoke(lease_id);  // best effort: the lease expires anyway
}

}  // namespace flurry::control::cluster
