// control/listen_lock.h — one address, one flurryd; one local node id, one flurryd.
//
// The socket backend's workers share their UDP port with SO_REUSEPORT, so a second flurryd on
// the same --listen would join the port and the kernel would spread clients over both: two
// processes issuing under one node id. Before any worker binds, flurryd takes this lock: an
// abstract-namespace Unix socket named after the listen address ("\0flurryd/udp/ADDR:PORT").
//   * bind() is atomic: the second flurryd gets EADDRINUSE, whatever the timing (race-free);
//   * the kernel releases it when the holder exits, even on kill -9 (no stale lock file);
//   * it lives in the network namespace, like the UDP port it stands for.
// The holder answers a connection on it with one line naming itself (pid, state dir, control
// socket), so the refusal can say who holds the address. Taken for the dpdk backend too: two
// af_packet instances on one veth would both answer every request.
// In local mode flurryd also takes "\0flurryd/local-node/N": two flurryds with one node id on
// one host (on two ports, or on 0.0.0.0 and 127.0.0.1) would issue the same IDs to their
// clients. (Across hosts, node ids are the operator's to keep apart, or etcd's: cluster mode.)
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace flurry::control {

class ListenLock {
 public:
  ListenLock() = default;
  ~ListenLock();
  ListenLock(const ListenLock&) = delete;
  ListenLock& operator=(const ListenLock&) = delete;

  // Takes the lock for `address`:`port`. `about` is the line a refused flurryd shows (who
  // holds it). Fails with StatusCode::refused naming the holder and the fix when it is held.
  Status acquire(const std::string& address, std::uint16_t port, const std::string& about);
  // The same for a local-mode node id.
  Status acquire_node(std::uint32_t node_id, const std::string& about);
  // The control loop polls this and calls serve(): each connection gets `about` and is closed.
  void poll_fds(std::vector<pollfd>* fds) const;
  void serve();

 private:
  // Fails with StatusCode::refused and the holder (who it is) as the message when held.
  Status acquire_name(const std::string& name, const std::string& about);

  std::vector<int> fds_;
  std::string about_;
};

}  // namespace flurry::control
