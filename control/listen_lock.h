// control/listen_lock.h — one address, one flurryd; one local node id, one flurryd; one state
// dir, one flurryd.
//
// The socket backend's workers share their UDP port with SO_REUSEPORT, so a second flurryd on
// the same --listen would join the port and the kernel would spread clients over both: two
// processes issuing under one node id. Before any worker binds, flurryd takes these locks, each
// an flock(LOCK_EX | LOCK_NB) on a lock file:
//   * udp-ADDR-PORT.lock (the listen address) and, in local mode, node-N.lock (two flurryds
//     with one node id on one host, on two ports or on 0.0.0.0 and 127.0.0.1, would issue the
//     same IDs) in the host's lock directory (lock_dir() below);
//   * flurryd.lock in the state directory.
// flock is atomic (the second flurryd is refused whatever the timing) and the kernel releases
// it when the holder exits, even on kill -9 (a stale file is harmless: nobody holds it).
// Only the owner can take or fake a lock: the directory must belong to flurryd's uid (or root)
// and be writable by nobody else, every lock file is opened O_NOFOLLOW | O_CLOEXEC, created mode
// 0600, and must be a regular file of flurryd's uid without group or other access. The holder
// writes its pid into the file; a refusal names the lock file and that pid (digits only, read
// from a file flurryd's uid owns), never text another process chose.
// Taken for the dpdk backend too: two af_packet instances on one veth would both answer every
// request. (Across hosts, node ids are the operator's to keep apart, or etcd's: cluster mode.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace flurry::control {

// The directory of the host-wide lock files, created mode 0700 when missing: `configured`
// (--lock-dir) when given; else /run/flurry for root; else $RUNTIME_DIRECTORY (a systemd
// unit's RuntimeDirectory=, control/ops/flurryd.service); else $XDG_RUNTIME_DIR/flurry (the
// user's own runtime directory); else <state dir's parent>/.flurry-locks. A user other than
// root so shares the lock with the flurryds of the same user (a host-wide lock that root's
// flurryds see needs root, or one --lock-dir for all).
Result<std::string> lock_dir(const std::string& configured, const std::string& state_dir);

class ListenLock {
 public:
  ListenLock() = default;
  ~ListenLock();
  ListenLock(const ListenLock&) = delete;
  ListenLock& operator=(const ListenLock&) = delete;

  // Takes the lock for `address`:`port` in `dir` (lock_dir()). Fails with StatusCode::refused
  // naming the lock file, its holder's pid and the fix when it is held.
  Status acquire(const std::string& dir, const std::string& address, std::uint16_t port);
  // The same for a local-mode node id.
  Status acquire_node(const std::string& dir, std::uint32_t node_id);
  // flurryd.lock in the state directory (which must exist).
  Status acquire_state_dir(const std::string& state_dir);
  bool holds_state_dir() const { return state_dir_held_; }

 private:
  // Locks dir/name; refused: the message names the file and who holds it.
  Status acquire_file(const std::string& dir, const std::string& name);

  std::vector<int> fds_;
  bool state_dir_held_ = false;
};

}  // namespace flurry::control
