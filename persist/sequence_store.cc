// persist/sequence_store.cc — see sequence_store.h.
//
// On-disk format of <dir>/sequences: 64 entries x 2 slots x 4096 bytes (512 KiB), the file
// created complete (see below). Entry e's record number `sequence` lives in slot
// (2 * e + sequence % 2). Every integer is LITTLE-ENDIAN (persist/file_util.h). A slot:
//
//   offset size field
//        0    8 magic "FLRYSQ01"
//        8    8 sequence (0: the initial record; 1 for the first write of the entry, +1 per write)
//       16    1 in_use (1: holds a sequence; 0: free, or deleted: a tombstone when it has a name)
//       17    1 mode (0 segment, 1 monotonic)
//       18    1 name size (1..32)
//       19    1 reserved, 0
//       20   32 name, zero padded
//       52    4 reserved, 0
//       56    8 upper: every number below may have been issued, none at or above
//       64    8 step: the block size last reserved
//       72   52 reserved, 0
//      124    4 CRC-32 of bytes [0, 124)
//
// 128 zero bytes are an empty slot. A new file holds the initial record (sequence 0, not in
// use) in slot 0 of every entry, as the watermark file does: a crash tearing an entry's first
// write then leaves a valid initial record and a corrupt slot, not an empty and a corrupt one,
// which could not be told from damage to both. The valid slot with the highest sequence
// wins; an entry whose slots are both invalid but not both empty is damaged and refuses the
// start.
#include "persist/sequence_store.h"

#include "base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <span>

#include "persist/file_util.h"
#include "persist/io.h"
#include "persist/slot_writer.h"

namespace flurry::persist {
namespace {

constexpr std::array<std::uint8_t, 8> magic = {'F', 'L', 'R', 'Y', 'S', 'Q', '0', '1'};
constexpr std::size_t crc_offset = 124;
static_assert(crc_offset + 4 == SequenceStore::slot_size);
static_assert(SequenceStore::slot_size <= detail::SlotWriter::bytes_max);

using Slot = std::array<std::uint8_t, SequenceStore::slot_size>;

void encode(const SequenceRecord& record, std::uint64_t sequence, Slot& out) {
  out.fill(0);
  std::copy(magic.begin(), magic.end(), out.begin());
  detail::put_u64(&out[8], sequence);
  out[16] = record.in_use ? 1 : 0;
  out[17] = record.mode;
  const std::size_t size = std::min(record.name.size(), SequenceStore::name_size_max);
  out[18] = static_cast<std::uint8_t>(size);
  std::copy_n(record.name.begin(), size, out.begin() + 20);
  detail::put_u64(&out[56], record.upper);
  detail::put_u64(&out[64], record.step);
  detail::put_u32(&out[crc_offset], detail::slot_crc(out.data(), crc_offset));
}

struct Decoded {
  enum { empty, valid, corrupt } state = empty;
  std::uint64_t sequence = 0;
  SequenceRecord record;
};

Decoded decode(std::span<const std::uint8_t> slot, std::size_t index) {
  Decoded out;
  if (std::all_of(slot.begin(), slot.end(), [](std::uint8_t b) { return b == 0; })) return out;
  out.state = Decoded::corrupt;
  if (!std::equal(magic.begin(), magic.end(), slot.begin())) return out;
  if (detail::get_u32(&slot[crc_offset]) != detail::slot_crc(slot.data(), crc_offset)) return out;
  out.sequence = detail::get_u64(&slot[8]);
  const std::size_t size = slot[18];
  if (out.sequence % 2 != index % 2 || size > SequenceStore::name_size_max) return out;
  out.record.in_use = slot[16] == 1;
  out.record.mode = slot[17];
  out.record.name.assign(reinterpret_cast<const char*>(&slot[20]), size);
  out.record.upper = detail::get_u64(&slot[56]);
  out.record.step = detail::get_u64(&slot[64]);
  out.state = Decoded::valid;
  return out;
}

Result<int> open_or_create(Io& io, const std::string& dir, const std::string& path) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    if (errno != ENOENT) {
      return Error{"cannot open " + path + ": " + detail::errno_text(errno) + ": check its permissions"};
    }
    Result<detail::UniqueFd> dir_fd = detail::open_directory(dir);
    if (!dir_fd.ok()) return dir_fd.status();
    std::vector<std::uint8_t> initial(SequenceStore::file_size, 0);
    Slot slot;
    encode(SequenceRecord{}, 0, slot);
    for (std::size_t entry = 0; entry < SequenceStore::entries_max; ++entry) {
      const auto at = static_cast<std::ptrdiff_t>(2 * entry * SequenceStore::slot_stride);
      std::copy(slot.begin(), slot.end(), initial.begin() + at);
    }
    Result<detail::Created> created =
        detail::create_file_exclusive(io, dir_fd->get(), dir, std::string(SequenceStore::file_name), initial);
    if (!created.ok()) return created.status();
  }
  return Error{"cannot open " + path + ": it keeps disappearing"};
}

}  // namespace

SequenceStore::~SequenceStore() {
  writer_.reset();
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<SequenceStore>> SequenceStore::open(const std::string& dir, bool use_io_uring,
                                                           Io* io_in) {
  Io& io = io_in != nullptr ? *io_in : system_io();
  std::unique_ptr<SequenceStore> store(new SequenceStore());
  store->path_ = dir + "/" + std::string(file_name);
  Result<int> fd = open_or_create(io, dir, store->path_);
  if (!fd.ok()) return fd.status();
  store->fd_ = *fd;
  std::vector<std::uint8_t> bytes(file_size, 0);
  Result<std::size_t> read = detail::read_at(store->fd_, bytes, 0, "sequence file " + store->path_);
  if (!read.ok()) return read.status();
  for (std::size_t entry = 0; entry < entries_max; ++entry) {
    std::array<Decoded, 2> slots;
    for (std::size_t k = 0; k < 2; ++k) {
      const std::size_t at = (2 * entry + k) * slot_stride;
      slots[k] = decode(std::span<const std::uint8_t>(bytes).subspan(at, slot_size), k);
    }
    const bool valid0 = slots[0].state == Decoded::valid;
    const bool valid1 = slots[1].state == Decoded::valid;
    if (!valid0 && !valid1) {
      if (slots[0].state == Decoded::corrupt || slots[1].state == Decoded::corrupt) {
        return Error{
            "sequence file " + store->path_ + ": entry " + std::to_string(entry) +
            " has no valid record (both slots damaged); its numbers could be issued twice. Restore the "
            "file from a backup, or move it away to start without any sequence"};
      }
      continue;
    }
    const Decoded& winner =
        !valid1 || (valid0 && slots[0].sequence > slots[1].sequence) ? slots[0] : slots[1];
    store->sequences_[entry] = winner.sequence;
    if (winner.record.in_use) {
      store->records_[entry] = winner.record;
    } else if (!winner.record.name.empty()) {
      store->tombstones_[entry] = winner.record;  // a deleted sequence's floor
    }
  }
  store->writer_ = std::make_unique<detail::SlotWriter>(io, use_io_uring);
  return store;
}

Status SequenceStore::write(std::size_t entry, const SequenceRecord& record) {
  const std::uint64_t sequence = sequences_[entry] + 1;
  Slot slot;
  encode(record, sequence, slot);
  const std::uint64_t offset = (2 * entry + sequence % 2) * slot_stride;
  if (Status written = writer_->write_and_sync(fd_, slot, offset); !written.ok()) {
    return std::move(written).context("cannot make sequence '" + record.name + "' durable in " + path_);
  }
  sequences_[entry] = sequence;
  records_[entry].reset();
  tombstones_[entry].reset();
  if (record.in_use) {
    records_[entry] = record;
  } else if (!record.name.empty()) {
    tombstones_[entry] = record;
  }
  return {};
}

std::string_view SequenceStore::method() const { return writer_->method(); }

}  // namespace flurry::persist
