// wire.go — the flurry v1 wire format (proto/PROTOCOL.md): request encoding with the zero
// padding that buys large answers, and response decoding by the 12 rules of "Response
// decoding" that need only the datagram. Big-endian throughout; byte order is handled only
// through encoding/binary here. Pure: no I/O, no clock.

package flurry

import (
	"encoding/binary"
	"fmt"
)

// Wire constants of PROTOCOL.md.
const (
	Magic              = 0x464c // "FL"
	ProtocolVersion    = 1      // the wire version byte; Version is the client's own release
	RequestHeaderSize  = 20
	ResponseHeaderSize = 20
	RangeSize          = 12
	InfoBodySize       = 16
	DatagramSizeMax    = 1472    // the largest UDP payload of a 1500-byte MTU
	CountMax           = 1 << 20 // the most IDs one GET_IDS request may ask for
	AmplificationMax   = 3       // an answer is at most 3x its request
	opcodeResponseBit  = 0x80
	flagAuth           = 0x0001
)

// Opcode is a request's operation.
type Opcode uint8

const (
	OpGetIDs Opcode = 1
	OpPing   Opcode = 2
	OpInfo   Opcode = 3
	OpGetSeq Opcode = 4 // numbers of a named sequence (Client.GetSeq)
)

// SeqNameSizeMax is the longest sequence name GET_SEQ carries.
const SeqNameSizeMax = 32

// validSeqName: 1..SeqNameSizeMax characters from A-Z a-z 0-9 _ . - :
func validSeqName(name string) bool {
	if len(name) < 1 || len(name) > SeqNameSizeMax {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':') {
			return false
		}
	}
	return true
}

var opcodeNames = [...]string{OpGetIDs: "GET_IDS", OpPing: "PING", OpInfo: "INFO", OpGetSeq: "GET_SEQ"}

func (o Opcode) String() string { return nameOf(opcodeNames[:], int(o), "opcode") }

// nameOf is names[v], or "<kind> <v>" for a value without a name.
func nameOf(names []string, v int, kind string) string {
	if v >= 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s %d", kind, v)
}

// Status is a response's outcome.
type Status uint8

const (
	StatusOK           Status = 0
	StatusRetry        Status = 1
	StatusBadRequest   Status = 2
	StatusUnauthorized Status = 3
	StatusFenced       Status = 4
	StatusUnknownSeq   Status = 5 // GET_SEQ only
	StatusNotOwner     Status = 6 // GET_SEQ only; Detail is the owner's node id
	// GET_IDS: the layout's time has run out; GET_SEQ: the sequence reached 2^63. Nothing can
	// be issued again, by this server or any other.
	StatusExhausted Status = 7
)

// FENCED's Detail: why the server issues nothing now.
const (
	FencedLost     = 0 // it holds no node id (lost its lease, or not claimed yet); any other value reads as this
	FencedDraining = 1 // its operator drained it before a planned stop
)

// NotOwnerUnknown is a NOT_OWNER answer's Detail when no node owns the sequence now.
const NotOwnerUnknown = 0xFFFFFFFF

var statusNames = [...]string{"OK", "RETRY", "BAD_REQUEST", "UNAUTHORIZED", "FENCED", "UNKNOWN_SEQUENCE", "NOT_OWNER",
	"EXHAUSTED"}

func (s Status) String() string { return nameOf(statusNames[:], int(s), "status") }

// RequestErrorName names the RequestError number a BAD_REQUEST or UNAUTHORIZED answer carries
// in `detail` (PROTOCOL.md "Request errors"); "unknown" for a number v1 does not use.
func RequestErrorName(number uint32) string {
	if name, ok := requestErrorNames[number]; ok {
		return name
	}
	return "unknown"
}

var requestErrorNames = map[uint32]string{
	0: "ok", 1: "too_short", 2: "bad_magic", 3: "too_long", 4: "is_response", 16: "bad_version",
	17: "bad_opcode", 18: "bad_flags", 19: "reserved_nonzero", 20: "count_zero", 21: "count_too_large",
	22: "trailing_bytes", 23: "count_unexpected", 24: "name_missing", 25: "name_too_long",
	26: "name_truncated", 27: "name_bad", 32: "auth_unsupported",
	33: "trailer_short", 34: "unknown_key", 35: "stale_timestamp", 36: "bad_mac", 37: "replay",
	38: "replay_full", 39: "not_permitted", 40: "rate_limited", 41: "auth_required", 42: "wrong_server",
}

// Request errors the client acts on.
const (
	errStaleTimestamp = 35
	errWrongServer    = 42
)

// ResponseError is why a datagram is not a usable response: rules 1..12 of PROTOCOL.md
// "Response decoding", in the order they are checked.
type ResponseError uint8

const (
	RespOK ResponseError = iota
	RespTooShort
	RespBadMagic
	RespTooLong
	RespBadVersion
	RespNotResponse
	RespBadStatus
	RespBadOpcode
	RespStatusUnexpected
	RespRangesUnexpected
	RespRangesMissing
	RespBadLength
	RespBadRange
)

var responseErrorNames = [...]string{
	"ok", "too_short", "bad_magic", "too_long", "bad_version", "not_response", "bad_status",
	"bad_opcode", "status_unexpected", "ranges_unexpected", "ranges_missing", "bad_length",
	"bad_range",
}

// String is the name PROTOCOL.md (and proto::to_string) gives the error.
func (e ResponseError) String() string {
	return nameOf(responseErrorNames[:], int(e), "response error")
}

// Range is count consecutive IDs: First, First+1, ..., First+Count-1.
type Range struct {
	First uint64
	Count uint32
}

// Info is the 16-byte INFO body: what a client needs to decode the server's IDs.
type Info struct {
	EpochMs      uint64
	TimeUnitMs   uint16
	TimeBits     uint8
	NodeBits     uint8
	SequenceBits uint8
	CoreBits     uint8
	CoreFrom     uint8 // 0: core bits top of the sequence; 1: bottom of the node field
	Workers      uint8
}

// ResponseHeader is the 20-byte response header. Opcode is without the response bit.
type ResponseHeader struct {
	Opcode     uint8
	Status     Status
	RangeCount uint8
	Node       uint16
	RequestID  uint64
	Detail     uint32
}

// Response is a decoded datagram. Ranges and Info are set only when Err is RespOK (Info only
// for an OK INFO answer).
type Response struct {
	Err    ResponseError
	Header ResponseHeader
	Ranges []Range
	Info   Info
}

// encodeRequest writes a request of max(20, size) bytes, zero-padded. Every field is written as
// given, so that tests can also produce the requests a server must reject.
func encodeRequest(opcode uint8, flags uint16, count uint32, requestID uint64, size int) []byte {
	if size < RequestHeaderSize {
		size = RequestHeaderSize
	}
	out := make([]byte, size)
	binary.BigEndian.PutUint16(out[0:], Magic)
	out[2] = ProtocolVersion
	out[3] = opcode
	binary.BigEndian.PutUint16(out[4:], flags)
	// out[6:8] reserved, out[20:] padding: zero.
	binary.BigEndian.PutUint32(out[8:], count)
	binary.BigEndian.PutUint64(out[12:], requestID)
	return out
}

// encodeSeqRequest writes a GET_SEQ request: the header, the name's length byte and bytes,
// zero padding up to size.
func encodeSeqRequest(flags uint16, count uint32, requestID uint64, name string, size int) []byte {
	least := RequestHeaderSize + 1 + len(name)
	if size < least {
		size = least
	}
	out := encodeRequest(uint8(OpGetSeq), flags, count, requestID, size)
	out[RequestHeaderSize] = uint8(len(name))
	copy(out[RequestHeaderSize+1:], name)
	return out
}

// ResponseSizeMax is the largest answer a request of requestSize bytes may get.
func ResponseSizeMax(requestSize int) int {
	if AmplificationMax*requestSize < DatagramSizeMax {
		return AmplificationMax * requestSize
	}
	return DatagramSizeMax
}

// RangesMax is how many ranges a GET_IDS answer to a request of requestSize bytes may carry.
func RangesMax(requestSize int) int {
	room := ResponseSizeMax(requestSize)
	if room <= ResponseHeaderSize {
		return 0
	}
	ranges := (room - ResponseHeaderSize) / RangeSize
	if ranges > 255 {
		return 255
	}
	return ranges
}

// RequestSizeForRanges is the padded request size that buys `ranges` ranges.
func RequestSizeForRanges(ranges int) int {
	size := (ResponseHeaderSize + ranges*RangeSize + AmplificationMax - 1) / AmplificationMax
	if size < RequestHeaderSize {
		return RequestHeaderSize
	}
	return size
}

// RangesForIDs is ceil(count / idsPerRange) + 1 (the first range may start mid-unit), capped
// at what the largest datagram carries. PROTOCOL.md "How a client asks for N IDs".
func RangesForIDs(count, idsPerRange uint64) int {
	if idsPerRange == 0 {
		idsPerRange = 1
	}
	ranges := (count+idsPerRange-1)/idsPerRange + 1
	if limit := uint64(RangesMax(DatagramSizeMax)); ranges > limit {
		return int(limit)
	}
	return int(ranges)
}

// RequestSizeForIDs is the padded size of a request for `count` IDs at idsPerRange per range.
func RequestSizeForIDs(count, idsPerRange uint64) int {
	return RequestSizeForRanges(RangesForIDs(count, idsPerRange))
}

// readResponseHeader reads the 20 header bytes at their offsets, checking nothing.
func readResponseHeader(b []byte) ResponseHeader {
	return ResponseHeader{
		Opcode:     b[3] &^ opcodeResponseBit,
		Status:     Status(b[4]),
		RangeCount: b[5],
		Node:       binary.BigEndian.Uint16(b[6:]),
		RequestID:  binary.BigEndian.Uint64(b[8:]),
		Detail:     binary.BigEndian.Uint32(b[16:]),
	}
}

func readInfo(b []byte) Info {
	return Info{
		EpochMs:      binary.BigEndian.Uint64(b[0:]),
		TimeUnitMs:   binary.BigEndian.Uint16(b[8:]),
		TimeBits:     b[10],
		NodeBits:     b[11],
		SequenceBits: b[12],
		CoreBits:     b[13],
		CoreFrom:     b[14],
		Workers:      b[15],
	}
}

// DecodeResponse applies rules 1..12 of PROTOCOL.md "Response decoding" in order and stops at
// the first failure. Rules 13..15 need the request; the client applies them (accept in
// exchange.go). Never reads outside datagram.
func DecodeResponse(datagram []byte) Response {
	n := len(datagram)
	if n < ResponseHeaderSize {
		return Response{Err: RespTooShort}
	}
	r := Response{Header: readResponseHeader(datagram)}
	h := &r.Header
	op := Opcode(h.Opcode)
	known := op == OpGetIDs || op == OpPing || op == OpInfo || op == OpGetSeq
	issues := op == OpGetIDs || op == OpGetSeq
	okGetIDs := issues && h.Status == StatusOK
	okInfo := op == OpInfo && h.Status == StatusOK
	want := ResponseHeaderSize + int(h.RangeCount)*RangeSize
	if okInfo {
		want = ResponseHeaderSize + InfoBodySize
	}
	switch {
	case binary.BigEndian.Uint16(datagram) != Magic:
		r.Err = RespBadMagic
	case n > DatagramSizeMax:
		r.Err = RespTooLong
	case datagram[2] != ProtocolVersion:
		r.Err = RespBadVersion
	case datagram[3]&opcodeResponseBit == 0:
		r.Err = RespNotResponse
	case h.Status > StatusExhausted:
		r.Err = RespBadStatus
	case !known && h.Status != StatusBadRequest:
		r.Err = RespBadOpcode
	case (h.Status == StatusRetry || h.Status == StatusFenced || h.Status == StatusExhausted) && !issues:
		r.Err = RespStatusUnexpected
	case (h.Status == StatusUnknownSeq || h.Status == StatusNotOwner) && op != OpGetSeq:
		r.Err = RespStatusUnexpected
	case h.RangeCount != 0 && !okGetIDs:
		r.Err = RespRangesUnexpected
	case okGetIDs && h.RangeCount == 0:
		r.Err = RespRangesMissing
	case n != want:
		r.Err = RespBadLength
	}
	if r.Err != RespOK {
		return r
	}
	if okInfo {
		r.Info = readInfo(datagram[ResponseHeaderSize:])
		return r
	}
	r.Ranges, r.Err = readRanges(datagram[ResponseHeaderSize:], int(h.RangeCount))
	return r
}

// readRanges is rule 12: every range nonempty, below 2^63, above the end of the one before.
func readRanges(body []byte, count int) ([]Range, ResponseError) {
	if count == 0 {
		return nil, RespOK
	}
	ranges := make([]Range, count)
	const signBit = uint64(1) << 63
	var end uint64 // first + count of the range before; 0 before the first
	for i := range ranges {
		r := Range{
			First: binary.BigEndian.Uint64(body[i*RangeSize:]),
			Count: binary.BigEndian.Uint32(body[i*RangeSize+8:]),
		}
		if r.Count == 0 || r.First > signBit || uint64(r.Count) > signBit-r.First || r.First < end {
			return nil, RespBadRange
		}
		end = r.First + uint64(r.Count)
		ranges[i] = r
	}
	return ranges, RespOK
}
