// persist/watermark_store.cc — see watermark_store.h.
//
// On-disk format of <dir>/watermark, versions 1 and 2. The file is 8192 bytes: slot 0 at
// offset 0, slot 1 at offset 4096, the rest zero. Record number `sequence` lives in slot
// `sequence % 2`, so each store() overwrites the older slot and a torn sector can only ever
// hit the slot being written. Every integer is LITTLE-ENDIAN, written byte by byte (no
// struct is ever copied to disk). A slot is 128 bytes; this code writes version 2 only and
// reads both versions (a file may hold one slot of each, after an upgrade):
//
//   offset size field                                       version 1     version 2
//        0    8 magic "FLRYWM01"                            yes           yes
//        8    4 format version                              1             2
//       12    4 reserved, 0
//       16    8 sequence (1 for the first record, +1 per store() or adopt(); see below for 0)
//       24    8 watermark_t (the time units of the record's layout)
//       32    4 node_id
//       36    4 reserved, 0
//       40    8 layout_fingerprint
//       48    8 written_unix_ms
//       56    4 reserved, 0                                 [56, 60)
//       60    4 CRC-32 of bytes [0, 60)                     [60, 64)      (layout bytes)
//       64   64 zero                                        [64, 128)
//  version 2 only, from offset 56:
//       56    8 layout epoch_ms
//       64    4 layout time_unit_ms
//       68    1 layout time_bits
//       69    1 layout node_bits
//       70    1 layout sequence_bits
//       71    1 layout core_bits
//       72    1 layout core_from (0: core bits from the sequence, 1: from the node)
//       73   51 reserved, 0
//      124    4 CRC-32 of bytes [0, 124)
//
// CRC-32 is zlib crc32 (IEEE polynomial). A slot of 128 zero bytes is "empty" (never
// written). A new file (and one reset by --accept-corrupt-state) holds the "initial record"
// in slot 0: version 2, sequence 0, watermark_t 0, the creating identity; it means "nothing
// stored yet" (loaded() is empty) and is never compared with an identity. Without it, a crash
// tearing the first store (sequence 1, slot 1) would leave an empty and a corrupt slot, which
// cannot be told from damage to both. Files created by the version-1 code start with two
// empty slots, which still read as new.
//
// A slot is decoded as version 2 when the CRC at 124 matches, else as version 1 when the CRC
// at 60 matches and bytes [64, 128) are zero; the version field must then agree. Anything else
// that fails the checks (short, magic, CRC, version, sequence and its slot) is "corrupt". The
// valid slot with the highest sequence wins. The file is created complete (temporary file, fsync, rename
// without replacing, directory fsync), so it never exists half-initialised and later writes
// never change its size: fdatasync is enough.
#include "persist/watermark_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>

#include "persist/file_util.h"
#include "persist/io.h"
#include "persist/slot_writer.h"

namespace flurry::persist {

namespace {

constexpr std::array<std::uint8_t, 8> magic = {'F', 'L', 'R', 'Y', 'W', 'M', '0', '1'};
constexpr std::size_t v1_crc_offset = 60;
constexpr std::size_t crc_offset = 124;  // version 2
// Bounded retries when the file is replaced between open() and flock().
constexpr int open_attempts_max = 8;

static_assert(crc_offset + 4 == WatermarkStore::slot_size);
static_assert(v1_crc_offset + 4 == WatermarkStore::v1_slot_size);
static_assert(WatermarkStore::slot_size <= WatermarkStore::slot_stride);
static_assert(WatermarkStore::slot_stride % 4096 == 0, "slots must not share a 4 KiB page");
static_assert(WatermarkStore::slot_size <= detail::SlotWriter::bytes_max);

using Slot = std::array<std::uint8_t, WatermarkStore::slot_size>;

void put_u32(std::uint8_t* at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::uint8_t>(value >> (8 * i));
}
void put_u64(std::uint8_t* at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::uint8_t>(value >> (8 * i));
}
std::uint32_t get_u32(const std::uint8_t* at) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{at[i]} << (8 * i);
  return value;
}
std::uint64_t get_u64(const std::uint8_t* at) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= std::uint64_t{at[i]} << (8 * i);
  return value;
}

// CRC-32 of the `covered` bytes before the CRC field.
std::uint32_t slot_crc(const std::uint8_t* slot, std::size_t covered) {
  return static_cast<std::uint32_t>(
      ::crc32(::crc32(0L, Z_NULL, 0), slot, static_cast<uInt>(covered)));
}

// Always version 2; record.layout must be set.
void encode_slot(const Record& record, Slot& out) {
  out.fill(0);
  std::copy(magic.begin(), magic.end(), out.begin());
  put_u32(&out[8], WatermarkStore::format_version);
  put_u64(&out[16], record.sequence);
  put_u64(&out[24], record.watermark_t);
  put_u32(&out[32], record.node_id);
  put_u64(&out[40], record.layout_fingerprint);
  put_u64(&out[48], record.written_unix_ms);
  const LayoutRecord& layout = record.layout.value();
  put_u64(&out[56], layout.epoch_ms);
  put_u32(&out[64], layout.time_unit_ms);
  out[68] = layout.time_bits;
  out[69] = layout.node_bits;
  out[70] = layout.sequence_bits;
  out[71] = layout.core_bits;
  out[72] = layout.core_from;
  put_u32(&out[crc_offset], slot_crc(out.data(), crc_offset));
}

enum class SlotState { empty, valid, corrupt };

struct SlotRead {
  SlotState state = SlotState::empty;
  Record record;
  std::string problem;  // why it is corrupt
};

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string hex64(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string slot_name(std::size_t index) {
  return "slot " + std::to_string(index) + " (offset " +
         std::to_string(index * WatermarkStore::slot_stride) + ")";
}

// `bytes` is what the file holds of this slot: shorter than a slot when the file is short.
SlotRead decode_slot(std::span<const std::uint8_t> bytes, std::size_t index,
                     std::uint64_t file_bytes) {
  SlotRead read;
  if (bytes.size() < WatermarkStore::slot_size) {
    read.state = SlotState::corrupt;
    read.problem = "truncated (the file is " + std::to_string(file_bytes) + " bytes)";
    return read;
  }
  if (std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; })) {
    read.state = SlotState::empty;
    return read;
  }
  read.state = SlotState::corrupt;
  if (!std::equal(magic.begin(), magic.end(), bytes.begin())) {
    read.problem = "bad magic";
    return read;
  }
  // The CRC position depends on the version, and the version field is only trusted once a
  // CRC covers it: try version 2's CRC, then version 1's.
  const std::uint32_t stored_crc = get_u32(&bytes[crc_offset]);
  const std::uint32_t computed_crc = slot_crc(bytes.data(), crc_offset);
  std::uint32_t crc_version = 0;
  if (stored_crc == computed_crc) {
    crc_version = 2;
  } else if (get_u32(&bytes[v1_crc_offset]) == slot_crc(bytes.data(), v1_crc_offset) &&
             std::all_of(bytes.begin() + WatermarkStore::v1_slot_size, bytes.end(),
                         [](std::uint8_t b) { return b == 0; })) {
    crc_version = 1;
  } else {
    read.problem = "CRC mismatch (stored " + hex32(stored_crc) + ", computed " +
                   hex32(computed_crc) + ")";
    return read;
  }
  const std::uint32_t version = get_u32(&bytes[8]);
  if (version != crc_version) {
    read.problem = "unknown format version " + std::to_string(version) +
                   " (this flurryd reads versions 1 and " +
                   std::to_string(WatermarkStore::format_version) + ")";
    return read;
  }
  read.record.format_version = version;
  if (version >= 2) {
    LayoutRecord layout;
    layout.epoch_ms = get_u64(&bytes[56]);
    layout.time_unit_ms = get_u32(&bytes[64]);
    layout.time_bits = bytes[68];
    layout.node_bits = bytes[69];
    layout.sequence_bits = bytes[70];
    layout.core_bits = bytes[71];
    layout.core_from = bytes[72];
    read.record.layout = layout;
  }
  read.record.sequence = get_u64(&bytes[16]);
  read.record.watermark_t = get_u64(&bytes[24]);
  read.record.node_id = get_u32(&bytes[32]);
  read.record.layout_fingerprint = get_u64(&bytes[40]);
  read.record.written_unix_ms = get_u64(&bytes[48]);
  // Sequence 0 is the initial record, only ever in slot 0, only with W 0, version 2.
  const bool initial = read.record.sequence == 0 && index == 0 && version >= 2 &&
                       read.record.watermark_t == 0;
  if ((read.record.sequence == 0 && !initial) ||
      read.record.sequence % WatermarkStore::slot_count != index) {
    read.problem = "sequence " + std::to_string(read.record.sequence) +
                   " does not belong in slot " + std::to_string(index);
    return read;
  }
  read.state = SlotState::valid;
  return read;
}

std::uint64_t wall_unix_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The bytes of a new (or reset) file: the initial record (sequence 0, no watermark) in slot
// 0, the rest zero. Without it a crash that tears the first store would leave one empty and
// one corrupt slot, which cannot be told from two damaged slots.
std::array<std::uint8_t, WatermarkStore::file_size> initial_file(const Identity& identity) {
  Record record;
  record.format_version = WatermarkStore::format_version;
  record.sequence = 0;
  record.watermark_t = 0;
  record.node_id = identity.node_id;
  record.layout_fingerprint = identity.layout_fingerprint;
  record.written_unix_ms = wall_unix_ms();
  record.layout = identity.layout;
  Slot slot{};
  encode_slot(record, slot);
  std::array<std::uint8_t, WatermarkStore::file_size> bytes{};
  std::copy(slot.begin(), slot.end(), bytes.begin());
  return bytes;
}

std::string describe_identity(std::uint32_t node_id, std::uint64_t layout_fingerprint) {
  return "node " + std::to_string(node_id) + " with layout fingerprint " +
         hex64(layout_fingerprint);
}

}  // namespace

WatermarkStore::~WatermarkStore() {
  writer_.reset();  // reaps (or parks) requests in flight before the descriptor goes
  if (fd_ >= 0) ::close(fd_);  // also releases the flock
}

std::string_view WatermarkStore::method() const { return writer_->method(); }

std::vector<std::string> WatermarkStore::take_warnings() {
  std::vector<std::string> out;
  out.swap(warnings_);
  return out;
}

std::unique_ptr<WatermarkStore> WatermarkStore::open(const std::string& dir,
                                                     const Identity& identity,
                                                     const OpenOptions& options,
                                                     std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  Io& io = options.io != nullptr ? *options.io : system_io();
  if (!detail::make_directories(io, dir, error)) return nullptr;
  const int dir_fd = detail::open_directory(dir, error);
  if (dir_fd < 0) return nullptr;
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } dir_closer{dir_fd};

  std::unique_ptr<WatermarkStore> store(new WatermarkStore());
  store->path_ = dir + "/" + std::string(file_name);
  store->identity_ = identity;
  store->accept_identity_change_ = options.accept_identity_change;
  store->adopt_allowed_ = options.accept_identity_change;
  const std::string& path = store->path_;
  const std::string name(file_name);

  // Open (creating if needed), lock, and make sure the locked inode is still the one named
  // <dir>/watermark: a file replaced in between would leave two processes each holding a
  // lock on a different inode.
  for (int attempt = 0;; ++attempt) {
    if (attempt == open_attempts_max) {
      *error = "state file " + path + " keeps being replaced while flurryd opens it: make sure "
               "no other program writes to --state-dir " + dir;
      return nullptr;
    }
    int fd = ::openat(dir_fd, name.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0 && errno == ENOENT) {
      const auto created = detail::create_file_exclusive(io, dir_fd, dir, name,
                                                         initial_file(identity), error);
      if (created == detail::CreateResult::failed) return nullptr;
      continue;  // created by us or by a concurrent opener: open it now
    }
    if (fd < 0) {
      const int saved = errno;
      *error = "cannot open state file " + path + ": " + detail::errno_text(saved) +
               ": check its permissions and those of --state-dir " + dir;
      return nullptr;
    }
    store->fd_ = fd;  // closed by the store's destructor from here on
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) {
      const int saved = errno;
      *error = "cannot stat state file " + path + ": " + detail::errno_text(saved) +
               ": check the disk's health";
      return nullptr;
    }
    if (!S_ISREG(opened.st_mode)) {
      *error = "state file " + path + " is not a regular file, so writes to it are not "
               "durable: remove it and let flurryd create it";
      return nullptr;
    }
    int locked = 0;
    do {
      locked = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (locked != 0 && errno == EINTR);
    if (locked != 0) {
      const int saved = errno;
      if (saved == EWOULDBLOCK) {
        *error = "state file " + path + " is locked by another process (flock: " +
                 detail::errno_text(saved) + "): another flurryd is running with --state-dir " +
                 dir + "; stop it or give each flurryd its own --state-dir";
      } else {
        *error = "cannot lock state file " + path + ": " + detail::errno_text(saved) +
                 ": the file system of --state-dir " + dir + " must support flock";
      }
      return nullptr;
    }
    struct stat named {};
    if (::fstatat(dir_fd, name.c_str(), &named, 0) == 0 && named.st_dev == opened.st_dev &&
        named.st_ino == opened.st_ino) {
      break;
    }
    ::close(fd);
    store->fd_ = -1;
  }

  // Read both slots.
  std::array<std::uint8_t, file_size> bytes{};
  const long read_bytes = detail::read_at(store->fd_, bytes, 0, "state file " + path, error);
  if (read_bytes < 0) return nullptr;
  const auto file_bytes = static_cast<std::uint64_t>(read_bytes);
  std::array<SlotRead, slot_count> slots;
  for (std::size_t i = 0; i < slot_count; ++i) {
    const std::uint64_t begin = i * slot_stride;
    const std::uint64_t end = std::min(begin + slot_size, std::max(begin, file_bytes));
    slots[i] = decode_slot(std::span<const std::uint8_t>(bytes.data() + begin, end - begin), i,
                           file_bytes);
  }

  std::size_t winner = slot_count;
  for (std::size_t i = 0; i < slot_count; ++i) {
    if (slots[i].state != SlotState::valid) continue;
    if (winner == slot_count || slots[i].record.sequence > slots[winner].record.sequence) {
      winner = i;
    }
  }

  if (winner == slot_count) {
    const bool any_corrupt = std::any_of(slots.begin(), slots.end(), [](const SlotRead& s) {
      return s.state == SlotState::corrupt;
    });
    if (any_corrupt) {
      std::string problems;
      for (std::size_t i = 0; i < slot_count; ++i) {
        if (i != 0) problems += "; ";
        problems += slot_name(i) + ": " +
                    (slots[i].state == SlotState::empty ? std::string("empty") : slots[i].problem);
      }
      if (!options.accept_corrupt) {
        *error = "state file " + path + " holds no valid watermark record (" + problems +
                 "), and starting without it could issue IDs that were issued before: restore "
                 "the file from a backup, or start flurryd with --accept-corrupt-state to "
                 "start from watermark 0 (dangerous: IDs may repeat)";
        return nullptr;
      }
      // Keep the evidence, then reset the file to two empty slots.
      const std::string saved_name = name + ".corrupt-" + std::to_string(wall_unix_ms());
      std::string save_error;
      const auto saved = detail::create_file_exclusive(
          io, dir_fd, dir, saved_name,
          std::span<const std::uint8_t>(bytes.data(), static_cast<std::size_t>(file_bytes)),
          &save_error);
      const std::string saved_note =
          saved == detail::CreateResult::created
              ? "its bytes were saved to " + dir + "/" + saved_name
              : "saving its bytes failed (" +
                    (saved == detail::CreateResult::already_exists
                         ? dir + "/" + saved_name + " already exists"
                         : save_error) +
                    ")";
      if (!detail::write_all_at(io, store->fd_, initial_file(identity), 0, "state file " + path,
                                error)) {
        return nullptr;
      }
      if (const int synced = io.fdatasync(store->fd_); synced != 0) {
        const int sync_errno = -synced;
        *error = "cannot fdatasync state file " + path + ": " + detail::errno_text(sync_errno) +
                 ": check the disk's health and free space";
        return nullptr;
      }
      store->warnings_.push_back(
          "DANGEROUS: --accept-corrupt-state: state file " + path +
          " held no valid watermark record (" + problems +
          "); starting as new from watermark 0, so IDs issued before this start may be issued "
          "again; " + saved_note);
    }
    // Both slots empty: a file created by the version-1 code that never stored.
  } else if (slots[winner].record.sequence == 0) {
    // The initial record: created (or reset), nothing stored since. A corrupt slot 1 is a
    // first store that a crash interrupted (or damage to it, as for any other latest slot).
    if (slots[1].state == SlotState::corrupt) {
      store->warnings_.push_back("state file " + path + ": " + slot_name(1) + " is corrupt (" +
                                 slots[1].problem + "); " + slot_name(0) +
                                 " holds the initial record, so starting from watermark 0; the "
                                 "next store rewrites " + slot_name(1));
    }
  } else {
    const SlotRead& won = slots[winner];
    const std::size_t other_index = 1 - winner;
    const SlotRead& other = slots[other_index];
    store->loaded_ = won.record;
    store->sequence_ = won.record.sequence;
    store->durable_watermark_t_ = won.record.watermark_t;
    const std::string recovered = "recovered watermark " + std::to_string(won.record.watermark_t) +
                                  " (sequence " + std::to_string(won.record.sequence) +
                                  ") from " + slot_name(winner);
    if (other.state == SlotState::corrupt) {
      store->warnings_.push_back("state file " + path + ": " + slot_name(other_index) +
                                 " is corrupt (" + other.problem + "); " + recovered +
                                 "; the next store rewrites " + slot_name(other_index));
    } else if (other.state == SlotState::empty && won.record.sequence >= slot_count) {
      // Sequence >= 2 means both slots were written before: a zeroed slot is damage.
      store->warnings_.push_back("state file " + path + ": " + slot_name(other_index) +
                                 " is zeroed although sequence " +
                                 std::to_string(won.record.sequence) +
                                 " shows it was written before; " + recovered);
    } else if (other.state == SlotState::valid &&
               other.record.node_id == won.record.node_id &&
               other.record.layout_fingerprint == won.record.layout_fingerprint &&
               other.record.watermark_t > won.record.watermark_t) {
      // Only records of one identity are comparable: after adopt() the older slot holds the
      // previous identity's watermark in other units until the next store() overwrites it.
      // Never written by this code (W never decreases within an identity), but a higher W
      // is always the safe one to keep.
      store->durable_watermark_t_ = other.record.watermark_t;
      store->warnings_.push_back(
          "state file " + path + ": " + slot_name(other_index) + " (sequence " +
          std::to_string(other.record.sequence) + ") holds watermark " +
          std::to_string(other.record.watermark_t) + ", above the newer " +
          slot_name(winner) + " (sequence " + std::to_string(won.record.sequence) +
          ", watermark " + std::to_string(won.record.watermark_t) + "); keeping the higher one");
    }
    if (won.record.node_id != identity.node_id ||
        won.record.layout_fingerprint != identity.layout_fingerprint) {
      const std::string was = describe_identity(won.record.node_id, won.record.layout_fingerprint);
      const std::string now = describe_identity(identity.node_id, identity.layout_fingerprint);
      if (!options.accept_identity_change) {
        *error = "state file " + path + " belongs to " + was + ", but this flurryd runs as " +
                 now + ": point --state-dir at this node's own directory, or start flurryd "
                 "with --accept-state-change to keep its watermark and adopt node " +
                 std::to_string(identity.node_id) + " and this layout";
        return nullptr;
      }
      store->warnings_.push_back(
          "--accept-state-change: state file " + path + " belonged to " + was +
          "; keeping its watermark " + std::to_string(store->durable_watermark_t_) +
          " (layout time units, as stored) and adopting " + now +
          "; the next store records the new identity");
    }
  }

  store->io_ = &io;
  store->writer_ = std::make_unique<detail::SlotWriter>(io, options.use_io_uring,
                                                        &store->warnings_);
  return store;
}

bool WatermarkStore::store(std::uint64_t watermark_t, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  if (watermark_t < durable_watermark_t_) {
    ++store_failures_;
    *error = "refusing to store watermark " + std::to_string(watermark_t) + " in " + path_ +
             ": it would lower the durable watermark " + std::to_string(durable_watermark_t_) +
             ", and the watermark never decreases";
    return false;
  }
  return write_record(watermark_t, identity_, error);
}

bool WatermarkStore::adopt(const Identity& identity, std::uint64_t carried_watermark_t,
                           std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  const auto refuse = [&](const std::string& why) {
    ++store_failures_;
    *error = "refusing to adopt " + describe_identity(identity.node_id,
                                                      identity.layout_fingerprint) +
             " with watermark " + std::to_string(carried_watermark_t) + " in " + path_ + ": " +
             why;
    return false;
  };
  if (!accept_identity_change_) {
    return refuse("the store was not opened with accept_identity_change "
                  "(flurryd --accept-state-change)");
  }
  if (!adopt_allowed_) {
    return refuse("a store() or adopt() already succeeded; adopt() is only allowed right after "
                  "open()");
  }
  if (!loaded_.has_value()) {
    return refuse("the file holds no record to adopt from; use store()");
  }
  if (loaded_->node_id == identity.node_id &&
      loaded_->layout_fingerprint == identity.layout_fingerprint) {
    return refuse("the stored record already belongs to it, and adopt() must not lower its "
                  "watermark " + std::to_string(durable_watermark_t_) + "; use store()");
  }
  const std::uint64_t previous_t = durable_watermark_t_;
  if (!write_record(carried_watermark_t, identity, error)) return false;
  identity_ = identity;
  warnings_.push_back("state file " + path_ + ": adopted " +
                      describe_identity(identity.node_id, identity.layout_fingerprint) +
                      " with carried watermark " + std::to_string(carried_watermark_t) +
                      " (was " + std::to_string(previous_t) + " in the units of " +
                      describe_identity(loaded_->node_id, loaded_->layout_fingerprint) + ")");
  return true;
}

// Writes record sequence_ + 1 for (watermark_t, identity) and makes it durable; updates the
// counters. The caller has checked that this W may be written.
bool WatermarkStore::write_record(std::uint64_t watermark_t, const Identity& identity,
                                  std::string* error) {
  Record record;
  record.format_version = format_version;
  record.sequence = sequence_ + 1;
  record.watermark_t = watermark_t;
  record.node_id = identity.node_id;
  record.layout_fingerprint = identity.layout_fingerprint;
  record.written_unix_ms = wall_unix_ms();
  record.layout = identity.layout;
  encode_slot(record, slot_buffer_);
  const std::uint64_t offset = (record.sequence % slot_count) * slot_stride;

  const auto started = std::chrono::steady_clock::now();
  std::string failure;
  const bool ok = writer_->write_and_sync(fd_, slot_buffer_, offset, &failure);
  last_store_latency_ns_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                           started)
          .count());
  if (!ok) {
    ++store_failures_;
    *error = "cannot make watermark " + std::to_string(watermark_t) + " durable in " + path_ +
             ": " + failure + "; the durable watermark stays " +
             std::to_string(durable_watermark_t_) + ": check free space and the disk's health";
    return false;
  }
  sequence_ = record.sequence;
  durable_watermark_t_ = watermark_t;
  adopt_allowed_ = false;
  ++stores_;
  return true;
}

}  // namespace flurry::persist
