"""The ID layout (proto/PROTOCOL.md "The ID"): decode an ID into time/node/core/counter and
compose one back, with the layout an INFO answer reports.

Contract: Layout.decode and Layout.compose are exact inverses for every ID that fits the
layout. A layout from a server is untrusted: validate() says what is wrong with it (None when
it is usable) and Client.layout() refuses one that fails, as `flurry decode --server` does.
"""

from __future__ import annotations

import datetime
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


def format_unix_ms(unix_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(unix_ms // 1000, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{unix_ms % 1000:03d}Z"


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
