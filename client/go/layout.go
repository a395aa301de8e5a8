// layout.go — the bit layout of a flurry ID (PROTOCOL.md "The ID"): decode an ID into time,
// node, core and counter, compose one from them, and check a layout the way proto::validate
// does (without the clock-dependent checks, which do not matter for decoding). Pure.

package flurry

import (
	"fmt"
	"time"
)

// CoreFrom is where the worker core bits of an ID come from.
type CoreFrom uint8

const (
	CoreFromSequence CoreFrom = 0 // the top core bits of the sequence field (the default)
	CoreFromNode     CoreFrom = 1 // the bottom core bits of the node field
)

// DefaultEpochMs is 2024-01-01T00:00:00Z in Unix milliseconds.
const DefaultEpochMs = 1_704_067_200_000

// timeRangeMinMs: a layout covers at least 30 years (30 x 365.25 days).
const timeRangeMinMs = 30 * 36_525 * 86_400_000 / 100

// Layout describes how an ID's 63 bits split. Build one from INFO (Info.Layout) or with
// SnowflakeLayout; check it with Validate before decoding IDs with it.
type Layout struct {
	TimeBits     uint
	NodeBits     uint
	SequenceBits uint
	CoreBits     uint
	CoreFrom     CoreFrom
	EpochMs      uint64
	TimeUnitMs   uint64 // 1, 10 or 1000
}

// Decoded is an ID taken apart. Node is the node id (never the raw node field).
type Decoded struct {
	Time    uint64 // time field, in layout units since the epoch
	UnixMs  uint64 // the same instant in Unix milliseconds
	Node    uint32
	Core    uint32
	Counter uint32
}

// UTC is UnixMs as a time.Time in UTC.
func (d Decoded) UTC() time.Time { return time.UnixMilli(int64(d.UnixMs)).UTC() }

// SnowflakeLayout is the default layout: 41 time bits of 1 ms, 10 node, 12 sequence bits.
func SnowflakeLayout() Layout {
	return Layout{TimeBits: 41, NodeBits: 10, SequenceBits: 12, EpochMs: DefaultEpochMs, TimeUnitMs: 1}
}

// Layout is the layout an INFO answer describes. Not validated: call Validate.
func (i Info) Layout() Layout {
	return Layout{
		TimeBits:     uint(i.TimeBits),
		NodeBits:     uint(i.NodeBits),
		SequenceBits: uint(i.SequenceBits),
		CoreBits:     uint(i.CoreBits),
		CoreFrom:     CoreFrom(i.CoreFrom),
		EpochMs:      i.EpochMs,
		TimeUnitMs:   uint64(i.TimeUnitMs),
	}
}

func (l Layout) counterBits() uint {
	if l.CoreFrom == CoreFromSequence {
		return l.SequenceBits - l.CoreBits
	}
	return l.SequenceBits
}

// CounterCapacity is how many IDs one core issues in one time unit: the most one range holds.
func (l Layout) CounterCapacity() uint64 { return uint64(1) << l.counterBits() }

func mask(bits uint) uint64 { return uint64(1)<<bits - 1 }

// Decode takes an ID apart. Meaningful only for a layout that passed Validate.
func (l Layout) Decode(id uint64) Decoded {
	sequence := id & mask(l.SequenceBits)
	nodeField := (id >> l.SequenceBits) & mask(l.NodeBits)
	d := Decoded{Time: (id >> (l.NodeBits + l.SequenceBits)) & mask(l.TimeBits)}
	d.UnixMs = l.EpochMs + d.Time*l.TimeUnitMs
	if l.CoreFrom == CoreFromSequence {
		d.Node = uint32(nodeField)
		d.Core = uint32((sequence >> l.counterBits()) & mask(l.CoreBits))
		d.Counter = uint32(sequence & mask(l.counterBits()))
	} else {
		d.Node = uint32(nodeField >> l.CoreBits)
		d.Core = uint32(nodeField & mask(l.CoreBits))
		d.Counter = uint32(sequence)
	}
	return d
}

// Fits is false for an ID with bits above the layout's time + node + sequence bits: an ID of
// another layout (flurry decode refuses those too).
func (l Layout) Fits(id uint64) bool { return id>>(l.TimeBits+l.NodeBits+l.SequenceBits) == 0 }

// Compose builds the ID of (time, node, core, counter); the inverse of Decode.
func (l Layout) Compose(time uint64, node, core, counter uint32) uint64 {
	nodeField, sequence := uint64(node), uint64(core)<<l.counterBits()|uint64(counter)
	if l.CoreFrom == CoreFromNode {
		nodeField, sequence = uint64(node)<<l.CoreBits|uint64(core), uint64(counter)
	}
	return time<<(l.NodeBits+l.SequenceBits) | nodeField<<l.SequenceBits | sequence
}

// Validate applies the layout rules of PROTOCOL.md "The ID" that do not depend on the clock:
// widths time 1..50, node 0..16, sequence 1..31, at most 63 in all; unit 1, 10 or 1000 ms; at
// least 30 years of range; room for the core bits. A server that sent a layout failing them
// sent nonsense: do not decode its IDs with it.
func (l Layout) Validate() error {
	switch {
	case l.TimeBits < 1 || l.TimeBits > 50:
		return fmt.Errorf("time bits %d out of range 1..50", l.TimeBits)
	case l.NodeBits > 16:
		return fmt.Errorf("node bits %d out of range 0..16", l.NodeBits)
	case l.SequenceBits < 1 || l.SequenceBits > 31:
		return fmt.Errorf("sequence bits %d out of range 1..31", l.SequenceBits)
	case l.TimeBits+l.NodeBits+l.SequenceBits > 63:
		return fmt.Errorf("widths %d/%d/%d sum to more than 63 bits", l.TimeBits, l.NodeBits, l.SequenceBits)
	case l.TimeUnitMs != 1 && l.TimeUnitMs != 10 && l.TimeUnitMs != 1000:
		return fmt.Errorf("time unit %d ms is not 1, 10 or 1000", l.TimeUnitMs)
	case (mask(l.TimeBits)+1)*l.TimeUnitMs < timeRangeMinMs:
		return fmt.Errorf("%d time bits of %d ms cover less than 30 years", l.TimeBits, l.TimeUnitMs)
	case l.CoreFrom != CoreFromSequence && l.CoreFrom != CoreFromNode:
		return fmt.Errorf("core_from %d is not 0 (sequence) or 1 (node)", l.CoreFrom)
	case l.CoreFrom == CoreFromSequence && l.CoreBits > l.SequenceBits-1:
		return fmt.Errorf("%d core bits leave no counter bit of %d sequence bits", l.CoreBits, l.SequenceBits)
	case l.CoreFrom == CoreFromNode && l.CoreBits > l.NodeBits:
		return fmt.Errorf("%d core bits do not fit %d node bits", l.CoreBits, l.NodeBits)
	}
	return nil
}
