// control/cluster/membership.h — the node-id lease protocol (docs/cluster.md).
//
// Keys, per cluster:
//   /flurry/<cluster>/owner/<node>      bound to my lease; value {"instance","clock_ms"}
//   /flurry/<cluster>/watermark/<node>  no lease; decimal time field (layout units), the
//                                       highest W ever made durable for that node
//   /flurry/<cluster>/layout            the ID layout every member must share
// Protocol:
//   claim  — one transaction per candidate node: if owner/<n> is absent (create_revision 0),
//            create it under my lease and read watermark/<n>; the lowest free n first. A node
//            whose owner value carries my instance id (a restart inside the lease TTL) is
//            re-owned first, guarded by its exact mod_revision. Serving starts above the
//            watermark read in that same transaction.
//   renew  — one transaction: if owner/<n> is still under my lease and is the key I created
//            (compare lease and create_revision) and watermark/<n> is the version I last
//            saw (compare mod_revision), put watermark/<n> = W and refresh my owner value
//            (wall clock). If the owner compare fails, the node id is lost: `lost`, the
//            caller fences at once and claims again. If only the watermark moved (an earlier
//            renew of mine whose answer was lost landed meanwhile), it is re-read and the
//            renew tried once more, never writing below what is there.
//            The owner value is not compared (the spec's "value/lease"): it changes on
//            every renew, so an unanswered renew would make a value compare fence a healthy
//            node; lease + create_revision identify "the key I created under my lease".
//   keepalive — refreshes the lease on its own timer (its own thread and store).
// Safety never rests on the lease: a holder only issues up to a W that is already in
// watermark/<n>, and every later holder starts above it. The watermark written is never
// lower than any W attempted before, even when the wall clock steps back.
// Thread-safety: claim/renew/release on one thread at a time: flurryd's main thread (claim at start,
// release at stop), the renew thread (flurry-renew) in between (renew, re-claim); keepalive and
// observe_peer_clocks on the lease keeper's thread; status and lease_expired from any (the control
// loop fences on lease_expired).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "control/cluster/kv.h"
#include "proto/layout.h"

namespace flurry::control::cluster {

inline constexpr std::int64_t lease_ttl_s_min = 2;
inline constexpr std::int64_t lease_ttl_s_max = 300;
inline constexpr std::uint64_t clock_skew_ms_max_lower = 10;
inline constexpr std::uint64_t clock_skew_ms_max_upper = 3'600'000;
inline constexpr std::size_t cluster_name_size_max = 64;

struct MembershipConfig {
  std::string cluster;      // [A-Za-z0-9._-]{1,64}
  std::string instance_id;  // persist/'s identity file: stable across restarts of one node
  proto::Layout layout;     // validated; every member must use the same one
  std::int64_t lease_ttl_s = 10;
  std::uint64_t clock_skew_ms_max = 1000;
  // How many candidate node ids one claim() tries before it reports `retry`.
  std::uint32_t claim_attempts_max = 8;
};

// Fails with one sentence naming the bad field, its bounds and the fix.
Status validate(const MembershipConfig& config);

enum class LeaseState : std::uint8_t { claiming, serving, degraded_etcd, fenced };
std::string_view to_string(LeaseState state);
inline constexpr LeaseState lease_states[] = {LeaseState::claiming, LeaseState::serving,
                                              LeaseState::degraded_etcd, LeaseState::fenced};

// What the control socket and metrics show (`flurryctl lease`).
struct LeaseStatus {
  LeaseState state = LeaseState::claiming;
  bool holds_node = false;
  std::uint32_t node_id = 0;
  std::int64_t lease_id = 0;
  std::int64_t lease_ttl_s = 0;
  std::int64_t ttl_left_ms = 0;  // estimate from the last keep-alive answer
  std::uint64_t last_renew_latency_us = 0;
  std::uint64_t durable_watermark_t = 0;  // highest W acknowledged by etcd
  std::string endpoint;                   // etcd endpoint in use
  std::uint64_t claims = 0;
  std::uint64_t renewals = 0;
  std::uint64_t renew_failures = 0;
  std::uint64_t keepalive_failures = 0;
  std::uint64_t node_ids_lost = 0;
  std::string last_error;
  // The last look at the peers' clocks while serving (Membership::observe_peer_clocks):
  // this node's wall clock minus the median of the clocks the peers last wrote, which lag the
  // peers' real clocks by up to one of their renews. peers 0: none seen, or no look yet.
  std::int64_t peer_clock_skew_ms = 0;
  std::size_t peers = 0;
};

// Parsed owner value.
struct OwnerValue {
  std::string instance_id;
  std::uint64_t clock_ms = 0;
};
std::string encode_owner_value(const OwnerValue& value);
bool decode_owner_value(std::string_view text, OwnerValue* value);

// Median of the peers' clocks, and my skew from it (mine - median). Empty peers: 0 skew.
std::int64_t clock_skew_ms(std::uint64_t mine_ms, std::vector<std::uint64_t> peers_ms);

class Membership {
 public:
  Membership(KvStore& store, const Clock& clock, MembershipConfig config);

  // One attempt to hold a node id. Bounded: a lease grant, a layout check, one listing of
  // the owners and at most claim_attempts_max transactions. Ok: node_id() and floor_t()
  // are set. Fails with StatusCode::unavailable when etcd is unreachable or every race was
  // lost (try again after a backoff), StatusCode::refused when retrying alone will not help
  // (clock skew, all node ids taken, layout mismatch, corrupt watermark: the message says
  // which and how to fix it).
  Status claim();
  std::uint32_t node_id() const;
  // The last claim() failed only because the clock check waits on peers' owner values that
  // may be stale (their next renew, or their lease's end): worth another look soon.
  bool waiting_on_peers() const;
  // The watermark read when the node id was claimed: serve strictly above it.
  std::uint64_t floor_t() const;

  // Makes W (at least) durable in watermark/<node> while the node id is still mine. Fails
  // with StatusCode::lost when the node id is no longer mine (fence at once), otherwise
  // (etcd unreachable or a rule of the store) degraded: keep the held ceiling and retry.
  Status renew(std::uint64_t watermark_t);

  // Refreshes the lease through `store` (the keep-alive thread's own client). Returns the
  // store's answer; StatusCode::not_found means the lease expired: the node id is gone
  // (renew will fail `lost`, and lease_expired() is true until the next claim).
  Status keepalive(KvStore& store);
  // True once the lease is known gone, or its TTL (from the last acknowledged keep-alive,
  // counted from when it was sent) has run out on the monotonic clock.
  bool lease_expired() const;
  std::int64_t keepalive_interval_ms() const { return config_.lease_ttl_s * 1000 / 3; }
  // When the lease may expire in etcd, on the monotonic clock: the TTL of the last
  // acknowledged grant or keep-alive, counted from when it was sent. 0 when no lease is held
  // or it is known gone. Extended by every successful keep-alive.
  std::uint64_t lease_deadline_mono_ns() const;

  // The last lost node id was taken by a process with this member's own instance id while
  // this member was alive: its state dir was copied. Cleared by set_instance_id().
  bool clone_detected() const;
  // A new instance id for this member (after a clone was detected), used from the next claim.
  void set_instance_id(const std::string& instance_id);
  std::string instance_id() const;

  // Graceful stop: revokes the lease, so the owner key goes at once (the watermark stays).
  void release();

  // One listing of the owners through `store` while serving: the clock check of claim() as a
  // reading for operators (status().peer_clock_skew_ms, .peers), so a clock drifting on a
  // serving node is seen before a re-claim refuses it. True when the skew is beyond
  // clock_skew_ms_max (a claim now would be held up or refused). Fails (status untouched) when
  // etcd does not answer. Any thread (the keep-alive thread calls it).
  Result<bool> observe_peer_clocks(KvStore& store);

  LeaseStatus status() const;
  const MembershipConfig& config() const { return config_; }

  std::string owner_key(std::uint32_t node) const;
  std::string watermark_key(std::uint32_t node) const;
  std::string layout_key() const;
  std::string owners_prefix() const;

 private:
  struct Peer {
    std::uint32_t node = 0;
    std::int64_t mod_revision = 0;
    std::uint64_t clock_ms = 0;
  };
  struct OwnerListing {
    std::map<std::uint32_t, KeyValue> owners;  // every node id of this layout that is taken
    std::vector<Peer> peers;                   // owners with another instance id
    std::vector<std::uint32_t> mine;           // owner keys that carry my instance id
  };
  struct Candidate {
    std::uint32_t node = 0;
    std::int64_t mod_revision = 0;  // 0: the owner key must be absent
  };

  // claim(), step by step.
  OwnerListing classify_owners(std::vector<KeyValue> kvs) const;
  std::vector<Candidate> pick_candidates(const OwnerListing& listing) const;
  Result<OwnerListing> list_owners();
  // looked_ns: the monotonic time before the listing that found `peers` was sent.
  Status check_skew(const std::vector<Peer>& peers, std::uint64_t looked_ns);
  Status refuse_skew(std::int64_t skew, std::size_t count);
  std::vector<std::uint64_t> aged_clocks_locked(const std::vector<Peer>& peers) const;
  // After each write etcd acknowledged (a claim, a renew): when, and its revision.
  void note_etcd_wrote_locked(std::int64_t revision);
  // The clock passed the check against `peers` peers (a claim's, or a look while serving):
  // when, and the wall clock's offset from the monotonic clock then. No peers: nothing passed.
  void note_clock_checked_locked(std::size_t peers);
  std::int64_t clock_offset_ms() const;  // wall ms - monotonic ms now
  // The node id this process held last, as a claim candidate, if it is free or still under a
  // key of this instance; nullopt if it never held one or another member holds it now.
  std::optional<Candidate> last_node_candidate(const OwnerListing& listing) const;
  // The clock passed the check against peers within the last 4 lease TTLs, was not found
  // beyond it since, and has moved with the monotonic clock since (within half the allowed
  // skew): no step since it was last found right.
  bool clock_unstepped() const;
  Status refuse_all_taken();
  // One claim transaction on one candidate; nullopt: somebody else got there first.
  std::optional<Status> try_claim(const Candidate& candidate, std::int64_t lease_id,
                                  const std::string& my_value);
  Status hold_locked(const Candidate& candidate, const KeyValue& owner,
                     const std::vector<KeyValue>& watermark_kvs, std::uint64_t floor);
  struct RenewTarget;
  std::optional<Status> renew_once(RenewTarget& target, std::uint64_t start_ns);
  Status renew_failed_locked(const std::string& why);
  Status lose_node_locked(std::uint32_t node, const std::vector<KeyValue>& owner_kvs);
  Status ensure_lease();
  Status check_layout();
  // Records a failure of claim() as the last error and returns it.
  Status claim_failed(Status failure);
  void set_error_locked(const std::string& error);
  void update_state_locked();
  bool lease_expired_locked() const;

  KvStore& store_;
  const Clock& clock_;
  MembershipConfig config_;
  std::string layout_text_;

  mutable std::mutex mutex_;  // guards everything below
  LeaseStatus status_;
  bool layout_checked_ = false;
  bool lease_expired_ = false;
  bool clone_detected_ = false;
  bool renew_failing_ = false;        // the last renew got no answer
  bool keepalive_failing_ = false;    // the last keep-alive got no answer
  std::int64_t create_revision_ = 0;  // of my owner key: pins "the key I created"
  // mod_revision of watermark/<node> as last written or read by me (0: absent). A renew
  // only applies on top of exactly that version, so a delayed, older renew that lands late
  // can never lower the watermark.
  std::int64_t watermark_mod_revision_ = 0;
  std::uint64_t floor_t_ = 0;
  std::uint64_t attempted_watermark_t_ = 0;  // highest W ever sent (acknowledged or not)
  // Clock sanity: recorded peer clocks only ever lag the peers' real clocks, so "behind" is
  // refused at once, but "ahead" may be an artefact of stale values (a crashed peer's key
  // lives until its lease ends; every value is stale after an etcd outage). It is refused only
  // if it holds against values the peers composed after the first suspicion's look, less the
  // time since (so staleness never causes a refusal), and passes at once when it is within the
  // limit of the values aged by what is known of their age (aged_clocks_locked). A peer reads
  // its clock when it composes its owner value, and etcd commits the write later (a TLS
  // connect, an authentication, a loaded host: over a second was seen), so a value merely
  // newer than the look may have been composed before it. A member writes its owner key one
  // transaction after another, so only a value written after such a newer one (a peer's second
  // renewal since the look) was composed after it; the first may still pass, never refuse.
  bool skew_suspected_ = false;
  bool waiting_on_peers_ = false;           // the last claim() ended in a suspicion (above)
  std::uint64_t skew_suspect_mono_ns_ = 0;  // before the suspicion's look was sent
  std::map<std::uint32_t, std::int64_t> skew_suspect_revisions_;  // node -> owner mod_revision
  std::map<std::uint32_t, std::int64_t> skew_renewed_revisions_;  // node -> first newer one seen
  // This process's last write etcd acknowledged: when (0: none yet) and its revision. Peer
  // values not above that revision are at least that old (aged_clocks_locked).
  std::uint64_t wrote_mono_ns_ = 0;
  std::int64_t wrote_revision_ = 0;
  bool clock_checked_ = false;
  std::uint64_t checked_mono_ns_ = 0;
  std::int64_t checked_clock_offset_ms_ = 0;
  bool held_before_ = false;  // status_.node_id is the node id this process held last
  std::uint64_t ttl_answer_mono_ns_ = 0;
  std::int64_t ttl_answer_s_ = 0;
};

}  // namespace flurry::control::cluster
