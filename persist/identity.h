// persist/identity.h — the local instance identity: <dir>/identity.
//
// Contract: a random 128-bit instance id (getrandom), stored as 32 lowercase hex characters
// and a newline, created once and kept across restarts. Cluster mode puts it in its owner key
// so that a node restarted inside the lease TTL can re-own its node id (docs/cluster.md).
// Creation is crash-safe: temporary file, fsync, rename without replacing, directory fsync;
// the file either does not exist or holds a complete id. Two concurrent callers on one
// directory get the same id.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace flurry::persist {

class Io;  // persist/io.h

inline constexpr std::size_t instance_id_hex_chars = 32;

// Returns the instance id of <dir>/identity (32 lowercase hex characters), creating the
// directory (mode 0700) and the file when missing. Fails (one sentence naming the file, the
// errno text when there is one, and the fix) when:
// - the directory cannot be created or opened, or the file cannot be read or created;
// - getrandom fails;
// - the file exists but is not 32 hex characters (optionally followed by whitespace).
// Every change to the disk goes through `io` (nullptr: system_io()); once an id is returned,
// the file holding it is durable.
Result<std::string> load_or_create_instance_id(const std::string& dir, Io* io = nullptr);

// Replaces the instance id of <dir>/identity with a new random one and returns it (cluster
// mode, after this state dir was found to be a copy of a running member's). The old file is
// removed, then the new one created (which fsyncs the directory): a crash before that leaves
// the old id or none (the next start makes a new one); once it returns, the new id is durable.
// Errors as load_or_create_instance_id, and when the old file cannot be removed.
Result<std::string> replace_instance_id(const std::string& dir, Io* io = nullptr);

}  // namespace flurry::persist
