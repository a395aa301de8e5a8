"""The ID layout (proto/PROTOCOL.md "The ID"): decode an ID into time/node/core/counter and
compose one back, with the layout an INFO answer reports.

Contract: Layout.decode and Layout.compose are exact inverses for every ID that fits the
layout. A layout from a server is untrusted: validate() says what is wrong with it (None when
it is usable) and Client.layout() refuses one that fails, as `flurry decode --server` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import ID_BITS_MAX, Info

DEFAULT_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
TIME_RANGE_MIN_MS = 30 * 36_525 * 86_400_000 // 100  # 30 years of 365.25 days
CORE_FROM_SEQUENCE = 0
CORE_FROM_NODE = 1


@dataclass(frozen=True)
class Decoded:
    time: int  # time field, in layout units since the epoch
    unix_ms: int
    node: int  # the node id (never the raw node field)
    core: int
    counter: int

    def utc(self) -> str:
        """unix_ms as ISO-8601 UTC with milliseconds, e.g. 2025-01-01T00:02:03.456Z."""
        return format_unix_ms(self.unix_ms)


# Proleptic Gregorian calendar arithmetic on whole days since 1970-01-01 (H. Hinnant's
# days_from_civil / civil_from_days), exact for every year a layout reaches: datetime stops at
# 9999, and a layout of 1 s units may run for millions of years.

def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month 1..12, day 1..31) of `days` since 1970-01-01."""
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a valid (year, month, day)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def utc_fields(unix_ms: int) -> tuple[int, int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second, millisecond) in UTC of Unix milliseconds."""
    days, ms_of_day = divmod(unix_ms, 86_400_000)
    year, month, day = civil_from_days(days)
    seconds, ms = divmod(ms_of_day, 1000)
    return year, month, day, seconds // 3600, seconds // 60 % 60, seconds % 60, ms


def format_unix_ms(unix_ms: int) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2025-01-01T00:02:03.456Z (as proto::format_unix_ms)."""
    year, month, day, hour, minute, second, ms = utc_fields(unix_ms)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{ms:03d}Z"


@dataclass(frozen=True)
class Layout:
    time_bits: int = 41
    node_bits: int = 10
    sequence_bits: int = 12
    core_bits: int = 0
    core_from: int = CORE_FROM_SEQUENCE
    epoch_ms: int = DEFAULT_EPOCH_MS
    time_unit_ms: int = 1

    @classmethod
    def from_info(cls, info: Info) -> Layout:
        return cls(info.time_bits, info.node_bits, info.sequence_bits, info.core_bits,
                   info.core_from, info.epoch_ms, info.time_unit_ms)

    @property
    def id_bits(self) -> int:
        """Bits an ID of this layout may use: time + node + sequence."""
        return self.time_bits + self.node_bits + self.sequence_bits

    @property
    def time_max(self) -> int:
        """The largest time field."""
        return (1 << self.time_bits) - 1

    def end_unix_ms(self) -> int:
        """The layout's last instant (Unix ms): its last time unit's last millisecond."""
        return self.epoch_ms + (self.time_max + 1) * self.time_unit_ms - 1

    @property
    def counter_bits(self) -> int:
        return self.sequence_bits - (self.core_bits if self.core_from == CORE_FROM_SEQUENCE else 0)

    def compose(self, time: int, node: int, core: int, counter: int) -> int:
        if self.core_from == CORE_FROM_SEQUENCE:
            node_field, sequence_field = node, core << self.counter_bits | counter
        else:
            node_field, sequence_field = node << self.core_bits | core, counter
        return (time << (self.node_bits + self.sequence_bits) | node_field << self.sequence_bits
                | sequence_field)

    def decode(self, id_: int) -> Decoded:
        sequence_field = id_ & ((1 << self.sequence_bits) - 1)
        node_field = (id_ >> self.sequence_bits) & ((1 << self.node_bits) - 1)
        time = (id_ >> (self.node_bits + self.sequence_bits)) & ((1 << self.time_bits) - 1)
        core_mask = (1 << self.core_bits) - 1
        if self.core_from == CORE_FROM_SEQUENCE:
            node = node_field
            core = (sequence_field >> self.counter_bits) & core_mask
            counter = sequence_field & ((1 << self.counter_bits) - 1)
        else:
            node, core, counter = node_field >> self.core_bits, node_field & core_mask, sequence_field
        return Decoded(time, self.epoch_ms + time * self.time_unit_ms, node, core, counter)

    def validate(self) -> str | None:
        """The layout rules of PROTOCOL.md "The ID" that do not depend on the clock: None, or
        one sentence saying what is wrong."""
        if not (1 <= self.time_bits <= 50 and 0 <= self.node_bits <= 16
                and 1 <= self.sequence_bits <= 31):
            return "layout widths must be time 1..50, node 0..16, sequence 1..31 bits"
        total = self.time_bits + self.node_bits + self.sequence_bits
        if total > ID_BITS_MAX:
            return f"layout widths sum to {total} bits; at most {ID_BITS_MAX} are allowed"
        if self.time_unit_ms not in (1, 10, 1000):
            return f"time unit {self.time_unit_ms} ms is not 1, 10 or 1000"
        if self.core_from not in (CORE_FROM_SEQUENCE, CORE_FROM_NODE):
            return f"core_from {self.core_from} is not 0 (sequence) or 1 (node)"
        room = self.sequence_bits - 1 if self.core_from == CORE_FROM_SEQUENCE else self.node_bits
        if self.core_bits > room:
            return f"{self.core_bits} core bits do not fit the layout ({room} available)"
        if (1 << self.time_bits) * self.time_unit_ms < TIME_RANGE_MIN_MS:
            return "the time field covers less than 30 years"
        return None

    def fits(self, id_: int) -> bool:
        """True when id_ has no bit above the layout's widths."""
        return 0 <= id_ < 1 << (self.time_bits + self.node_bits + self.sequence_bits)
