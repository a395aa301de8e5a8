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

#include "base/log.h"

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

using detail::get_u32;
using detail::get_u64;
using detail::put_u32;
using detail::put_u64;
using detail::slot_crc;

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
  return "slot " + std::to_string(index) + " (offset " + std::to_string(index * WatermarkStore::slot_stride) +
         ")";
}

// `bytes` is what the file holds of this slot: shorter than a slot when the file is short.
SlotRead decode_slot(std::span<const std::uint8_t> bytes, std::size_t index, std::uint64_t file_bytes) {
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
    read.problem = "CRC mismatch (stored " + hex32(stored_crc) + ", computed " + hex32(computed_crc) + ")";
    return read;
  }
  const std::uint32_t version = get_u32(&bytes[8]);
  if (version != crc_version) {
    read.problem = "unknown format version " + std::to_string(version) +
                   " (this flurryd reads versions 1 and " + std::to_string(WatermarkStore::format_version) +
                   ")";
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
  const bool initial =
      read.record.sequence == 0 && index == 0 && version >= 2 && read.record.watermark_t == 0;
  if ((read.record.sequence == 0 && !initial) || read.record.sequence % WatermarkStore::slot_count != index) {
    read.problem = "sequence " + std::to_string(read.record.sequence) + " does not belong in slot " +
                   std::to_string(index);
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
  return "node " + std::to_string(node_id) + " with layout fingerprint " + hex64(layout_fingerprint);
}

}  // namespace

WatermarkStore::~WatermarkStore() {
  writer_.reset();             // reaps (or parks) requests in flight before the descriptor goes
  if (fd_ >= 0) ::close(fd_);  // also releases the flock
}

std::string_view WatermarkStore::method() const { return writer_->method(); }

bool WatermarkStore::uses_io_uring() const { return writer_->uses_io_uring(); }

namespace {

// What open() read of the file: its bytes and both slots decoded.
struct FileRead {
  std::array<std::uint8_t, WatermarkStore::file_size> bytes{};
  std::uint64_t file_bytes = 0;
  std::array<SlotRead, WatermarkStore::slot_count> slots;
};

Result<FileRead> read_file(int fd, const std::string& path) {
  FileRead read;
  Result<std::size_t> read_bytes = detail::read_at(fd, read.bytes, 0, "state file " + path);
  if (!read_bytes.ok()) return read_bytes.status();
  read.file_bytes = *read_bytes;
  for (std::size_t i = 0; i < WatermarkStore::slot_count; ++i) {
    const std::uint64_t begin = i * WatermarkStore::slot_stride;
    const std::uint64_t end = std::min(begin + WatermarkStore::slot_size, std::max(begin, read.file_bytes));
    read.slots[i] = decode_slot(std::span<const std::uint8_t>(read.bytes.data() + begin, end - begin), i,
                                read.file_bytes);
  }
  return read;
}

// The valid slot with the highest sequence, or slot_count when none is valid.
std::size_t winning_slot(const FileRead& read) {
  std::size_t winner = WatermarkStore::slot_count;
  for (std::size_t i = 0; i < WatermarkStore::slot_count; ++i) {
    if (read.slots[i].state != SlotState::valid) continue;
    if (winner == WatermarkStore::slot_count ||
        read.slots[i].record.sequence > read.slots[winner].record.sequence) {
      winner = i;
    }
  }
  return winner;
}

// Locks the open file; fails naming the other holder's likely cause.
Status lock_file(int fd, const std::string& path, const std::string& dir) {
  int locked = 0;
  do {
    locked = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked == 0) return {};
  const int saved = errno;
  if (saved == EWOULDBLOCK) {
    return Error{"state file " + path + " is locked by another process (flock: " + detail::errno_text(saved) +
                 "): another flurryd is running with --state-dir " + dir +
                 "; stop it or give each flurryd its own --state-dir"};
  }
  return Error{"cannot lock state file " + path + ": " + detail::errno_text(saved) +
               ": the file system of --state-dir " + dir + " must support flock"};
}

// Checks that the open file is a regular file, locks it, and tells whether the locked inode
// is still the one named <dir>/watermark (false: replaced in between, open it again).
Result<bool> lock_named_file(int dir_fd, int fd, const std::string& name, const std::string& path,
                             const std::string& dir) {
  struct stat opened {};
  if (::fstat(fd, &opened) != 0) {
    const int saved = errno;
    return Error{"cannot stat state file " + path + ": " + detail::errno_text(saved) +
                 ": check the disk's health"};
  }
  if (!S_ISREG(opened.st_mode)) {
    return Error{"state file " + path +
                 " is not a regular file, so writes to it are not "
                 "durable: remove it and let flurryd create it"};
  }
  if (Status locked = lock_file(fd, path, dir); !locked.ok()) return locked;
  struct stat named {};
  return ::fstatat(dir_fd, name.c_str(), &named, 0) == 0 && named.st_dev == opened.st_dev &&
         named.st_ino == opened.st_ino;
}

// Opens <dir>/watermark (creating it holding the initial record if needed) and locks it,
// making sure the locked inode is still the one named <dir>/watermark: a file replaced in
// between would leave two processes each holding a lock on a different inode.
Result<detail::UniqueFd> open_and_lock(Io& io, int dir_fd, const std::string& dir, const std::string& path,
                                       const Identity& identity) {
  const std::string name(WatermarkStore::file_name);
  for (int attempt = 0; attempt < open_attempts_max; ++attempt) {
    const int fd = ::openat(dir_fd, name.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0 && errno == ENOENT) {
      Result<detail::Created> created =
          detail::create_file_exclusive(io, dir_fd, dir, name, initial_file(identity));
      if (!created.ok()) return created.status();
      continue;  // created by us or by a concurrent opener: open it now
    }
    if (fd < 0) {
      const int saved = errno;
      return Error{"cannot open state file " + path + ": " + detail::errno_text(saved) +
                   ": check its permissions and those of --state-dir " + dir};
    }
    detail::UniqueFd file(fd);
    Result<bool> still_named = lock_named_file(dir_fd, fd, name, path, dir);
    if (!still_named.ok()) return still_named.status();
    if (*still_named) return file;
  }
  return Error{"state file " + path +
               " keeps being replaced while flurryd opens it: make sure "
               "no other program writes to --state-dir " +
               dir};
}

std::string describe_slots(const FileRead& read) {
  std::string problems;
  for (std::size_t i = 0; i < WatermarkStore::slot_count; ++i) {
    if (i != 0) problems += "; ";
    problems += slot_name(i) + ": " +
                (read.slots[i].state == SlotState::empty ? std::string("empty") : read.slots[i].problem);
  }
  return problems;
}

}  // namespace

struct WatermarkStore::Opening {
  // No valid slot and at least one corrupt: refuse, or (accept_corrupt) keep the evidence
  // and reset the file to the initial record.
  static Status reset_corrupt(WatermarkStore& store, Io& io, int dir_fd, const std::string& dir,
                              const FileRead& read, const OpenOptions& options) {
    const std::string& path = store.path_;
    const std::string problems = describe_slots(read);
    if (!options.accept_corrupt) {
      return Error{"state file " + path + " holds no valid watermark record (" + problems +
                   "), and starting without it could issue IDs that were issued before: restore "
                   "the file from a backup, or start flurryd with --accept-corrupt-state to "
                   "start from watermark 0 (dangerous: IDs may repeat)"};
    }
    // Keep the evidence, then reset the file to the initial record.
    const std::string saved_name = std::string(file_name) + ".corrupt-" + std::to_string(wall_unix_ms());
    const Result<detail::Created> saved = detail::create_file_exclusive(
        io, dir_fd, dir, saved_name,
        std::span<const std::uint8_t>(read.bytes.data(), static_cast<std::size_t>(read.file_bytes)));
    const std::string saved_note =
        !saved.ok() ? "saving its bytes failed (" + saved.message() + ")"
        : *saved == detail::Created::created
            ? "its bytes were saved to " + dir + "/" + saved_name
            : "saving its bytes failed (" + dir + "/" + saved_name + " already exists)";
    if (Status written =
            detail::write_all_at(io, store.fd_, initial_file(store.identity_), 0, "state file " + path);
        !written.ok()) {
      return written;
    }
    if (const int synced = io.fdatasync(store.fd_); synced != 0) {
      return Error{"cannot fdatasync state file " + path + ": " + detail::errno_text(-synced) +
                   ": check the disk's health and free space"};
    }
    log_warn("{}", "DANGEROUS: --accept-corrupt-state: state file " + path +
                       " held no valid watermark record (" + problems +
                       "); starting as new from watermark 0, so IDs issued before this start may be issued "
                       "again; " +
                       saved_note);
    return {};
  }

  // The winner is a stored record: load it, warn about the other slot when it looks damaged
  // (keeping the higher W of one identity), and check the identity.
  static Status load_winner(WatermarkStore& store, const FileRead& read, std::size_t winner,
                            const OpenOptions& options) {
    const SlotRead& won = read.slots[winner];
    store.loaded_ = won.record;
    store.sequence_ = won.record.sequence;
    store.durable_watermark_t_ = won.record.watermark_t;
    check_other_slot(store, read, winner);
    return check_identity(store, won.record, options);
  }

  static void check_other_slot(WatermarkStore& store, const FileRead& read, std::size_t winner) {
    const SlotRead& won = read.slots[winner];
    const std::size_t other_index = 1 - winner;
    const SlotRead& other = read.slots[other_index];
    const std::string& path = store.path_;
    const std::string recovered = "recovered watermark " + std::to_string(won.record.watermark_t) +
                                  " (sequence " + std::to_string(won.record.sequence) + ") from " +
                                  slot_name(winner);
    if (other.state == SlotState::corrupt) {
      log_warn("{}", "state file " + path + ": " + slot_name(other_index) + " is corrupt (" + other.problem +
                         "); " + recovered + "; the next store rewrites " + slot_name(other_index));
    } else if (other.state == SlotState::empty && won.record.sequence >= slot_count) {
      // Sequence >= 2 means both slots were written before: a zeroed slot is damage.
      log_warn("{}", "state file " + path + ": " + slot_name(other_index) + " is zeroed although sequence " +
                         std::to_string(won.record.sequence) + " shows it was written before; " + recovered);
    } else if (other.state == SlotState::valid && other.record.node_id == won.record.node_id &&
               other.record.layout_fingerprint == won.record.layout_fingerprint &&
               other.record.watermark_t > won.record.watermark_t) {
      // Only records of one identity are comparable: after adopt() the older slot holds the
      // previous identity's watermark in other units until the next store() overwrites it.
      // Never written by this code (W never decreases within an identity), but a higher W
      // is always the safe one to keep.
      store.durable_watermark_t_ = other.record.watermark_t;
      log_warn("{}", "state file " + path + ": " + slot_name(other_index) + " (sequence " +
                         std::to_string(other.record.sequence) + ") holds watermark " +
                         std::to_string(other.record.watermark_t) + ", above the newer " + slot_name(winner) +
                         " (sequence " + std::to_string(won.record.sequence) + ", watermark " +
                         std::to_string(won.record.watermark_t) + "); keeping the higher one");
    }
  }

  static Status check_identity(WatermarkStore& store, const Record& record, const OpenOptions& options) {
    const Identity& identity = store.identity_;
    if (record.node_id == identity.node_id && record.layout_fingerprint == identity.layout_fingerprint) {
      return {};
    }
    const std::string was = describe_identity(record.node_id, record.layout_fingerprint);
    const std::string now = describe_identity(identity.node_id, identity.layout_fingerprint);
    if (!options.accept_identity_change) {
      return Error{"state file " + store.path_ + " belongs to " + was + ", but this flurryd runs as " + now +
                   ": point --state-dir at this node's own directory, or start flurryd with "
                   "--accept-state-change to keep its watermark and adopt node " +
                   std::to_string(identity.node_id) + " and this layout"};
    }
    // Accepted: the caller (node/state_dir) decides what to do with the foreign record and says so.
    return {};
  }

  // The initial record won: nothing stored since the file was created (or reset). A corrupt
  // slot 1 is a first store that a crash interrupted (or damage to it, as for any other
  // latest slot).
  static void note_initial(WatermarkStore& store, const FileRead& read) {
    if (read.slots[1].state != SlotState::corrupt) return;
    log_warn("{}", "state file " + store.path_ + ": " + slot_name(1) + " is corrupt (" +
                       read.slots[1].problem + "); " + slot_name(0) +
                       " holds the initial record, so starting from watermark 0; the "
                       "next store rewrites " +
                       slot_name(1));
  }
};

Result<std::unique_ptr<WatermarkStore>> WatermarkStore::open(const std::string& dir, const Identity& identity,
                                                             const OpenOptions& options) {
  Io& io = options.io != nullptr ? *options.io : system_io();
  if (Status made = detail::make_directories(io, dir); !made.ok()) return made;
  Result<detail::UniqueFd> dir_fd = detail::open_directory(dir);
  if (!dir_fd.ok()) return dir_fd.status();

  std::unique_ptr<WatermarkStore> store(new WatermarkStore());
  store->path_ = dir + "/" + std::string(file_name);
  store->identity_ = identity;
  store->accept_identity_change_ = options.accept_identity_change;
  store->adopt_allowed_ = options.accept_identity_change;
  Result<detail::UniqueFd> file = open_and_lock(io, dir_fd->get(), dir, store->path_, identity);
  if (!file.ok()) return file.status();
  store->fd_ = file->release();  // closed by the store's destructor from here on

  Result<FileRead> read = read_file(store->fd_, store->path_);
  if (!read.ok()) return read.status();
  const std::size_t winner = winning_slot(*read);
  Status loaded;
  if (winner == slot_count) {
    // Both slots empty (a file created by the version-1 code that never stored) is new.
    const bool any_corrupt = std::any_of(read->slots.begin(), read->slots.end(),
                                         [](const SlotRead& s) { return s.state == SlotState::corrupt; });
    if (any_corrupt) loaded = Opening::reset_corrupt(*store, io, dir_fd->get(), dir, *read, options);
  } else if (read->slots[winner].record.sequence == 0) {
    Opening::note_initial(*store, *read);
  } else {
    loaded = Opening::load_winner(*store, *read, winner, options);
  }
  if (!loaded.ok()) return loaded;

  store->io_ = &io;
  store->writer_ = std::make_unique<detail::SlotWriter>(io, options.use_io_uring);
  return store;
}

Status WatermarkStore::store(std::uint64_t watermark_t) {
  if (watermark_t < durable_watermark_t_) {
    ++store_failures_;
    return Error{"refusing to store watermark " + std::to_string(watermark_t) + " in " + path_ +
                 ": it would lower the durable watermark " + std::to_string(durable_watermark_t_) +
                 ", and the watermark never decreases"};
  }
  return write_record(watermark_t, identity_);
}

Status WatermarkStore::adopt(const Identity& identity, std::uint64_t carried_watermark_t) {
  const auto refuse = [&](const std::string& why) -> Status {
    ++store_failures_;
    return Error{"refusing to adopt " + describe_identity(identity.node_id, identity.layout_fingerprint) +
                 " with watermark " + std::to_string(carried_watermark_t) + " in " + path_ + ": " + why};
  };
  if (!accept_identity_change_) {
    return refuse(
        "the store was not opened with accept_identity_change "
        "(flurryd --accept-state-change)");
  }
  if (!adopt_allowed_) {
    return refuse(
        "a store() or adopt() already succeeded; adopt() is only allowed right after "
        "open()");
  }
  if (!loaded_.has_value()) return refuse("the file holds no record to adopt from; use store()");
  if (loaded_->node_id == identity.node_id && loaded_->layout_fingerprint == identity.layout_fingerprint) {
    return refuse(
        "the stored record already belongs to it, and adopt() must not lower its "
        "watermark " +
        std::to_string(durable_watermark_t_) + "; use store()");
  }
  const std::uint64_t previous_t = durable_watermark_t_;
  if (Status written = write_record(carried_watermark_t, identity); !written.ok()) return written;
  identity_ = identity;
  log_warn("{}", "state file " + path_ + ": adopted " +
                     describe_identity(identity.node_id, identity.layout_fingerprint) +
                     " with carried watermark " + std::to_string(carried_watermark_t) + " (was " +
                     std::to_string(previous_t) + " in the units of " +
                     describe_identity(loaded_->node_id, loaded_->layout_fingerprint) + ")");
  return {};
}

// Writes record sequence_ + 1 for (watermark_t, identity) and makes it durable; updates the
// counters. The caller has checked that this W may be written.
Status WatermarkStore::write_record(std::uint64_t watermark_t, const Identity& identity) {
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
  const Status written = writer_->write_and_sync(fd_, slot_buffer_, offset);
  last_store_latency_ns_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started)
          .count());
  if (!written.ok()) {
    ++store_failures_;
    return Error{"cannot make watermark " + std::to_string(watermark_t) + " durable in " + path_ + ": " +
                 written.message() + "; the durable watermark stays " + std::to_string(durable_watermark_t_) +
                 ": check free space and the disk's health"};
  }
  sequence_ = record.sequence;
  durable_watermark_t_ = watermark_t;
  adopt_allowed_ = false;
  ++stores_;
  return {};
}

}  // namespace flurry::persist
