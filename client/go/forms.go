// forms.go — the text forms of a flurry ID, computed in the client (README "ID forms"; the
// exact definitions are the C++ client's client/forms.h, and client/forms-vectors.json is the
// table every client is checked against byte for byte).
//
// Contract: pure functions of the ID (and, where named, the layout or a key); nothing here
// has state beyond its arguments, and a ReadableForm, OpaqueKey or OpaqueKeyRing is immutable
// once made, so all of it is safe for many goroutines. Every failure is an *Error of
// CodeInvalidArgument (errors.Is(err, ErrInvalidArgument)) whose message says what is wrong
// with the input.
//
// The forms:
//
//	dec       decimal, no padding: "4194324487". Parsing accepts 1..19 digits, below 2^63.
//	hex       "0x" + 16 lower-case hex digits: "0x00000000fa005007". Parsing accepts 1..16
//	          digits after 0x or 0X, either case.
//	base32    Crockford base32, 13 symbols, most significant first, upper case:
//	          "0000003X00M07". Fixed width and in ASCII order, so string order is numeric
//	          order. Parsing accepts lower case and Crockford's aliases (I, i, L, l -> 1; O,
//	          o -> 0) and refuses anything else (U included), a length other than 13, and
//	          values of 2^63 or more.
//	readable  TIME TAG REST (ReadableForm): "240101000001000" "ORD" "0020487" for the
//	          default layout.
//	opaque    a keyed permutation of [0, 2^63) (OpaqueKey), written as the key id, '_' and the
//	          permuted number in base32: "k1_2TJVZN1P765Y3".
//	uuid      an RFC 9562 version-7 UUID that carries the whole ID (Layout.FormatUUID):
//	          "018cc251-f400-7000-8000-00000000fa00". Sorts by time, decodes back exactly.

package flurry

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Form is a text form of an ID.
type Form uint8

const (
	FormDec Form = iota
	FormHex
	FormReadable
	FormBase32
	FormOpaque
	FormUUID
)

// Forms are every form, in the order the C++ client lists them.
var Forms = []Form{FormDec, FormHex, FormReadable, FormBase32, FormOpaque, FormUUID}

var formNames = [...]string{"dec", "hex", "readable", "base32", "opaque", "uuid"}

// String is the form's name: "dec", "hex", "readable", "base32", "opaque" or "uuid".
func (f Form) String() string { return nameOf(formNames[:], int(f), "form") }

// ParseForm is the form of that name. Errors: ErrInvalidArgument for any other name.
func ParseForm(name string) (Form, error) {
	for _, form := range Forms {
		if form.String() == name {
			return form, nil
		}
	}
	return 0, formError("unknown ID form %s (dec, hex, readable, base32, opaque, uuid)", quoted(name))
}

// Sizes and bounds of the forms.
const (
	IDMax        = 1<<63 - 1 // IDs keep bit 63 clear
	DecSizeMax   = 19
	HexSize      = 18
	Base32Size   = 13
	UUIDSize     = 36
	TagSizeMax   = 4  // readable: the tag's most chars, of A-Z and 0-9
	KeyIDSizeMax = 8  // opaque: a key id is 1..8 chars of a-z and 0-9
	OpaqueRounds = 10 // opaque: the Feistel network's rounds
)

func formError(format string, args ...any) *Error {
	return newError(CodeInvalidArgument, fmt.Sprintf(format, args...))
}

// quoted quotes untrusted text for a message, cut to a readable length.
func quoted(text string) string {
	const shownMax = 48
	if len(text) > shownMax {
		return "'" + text[:shownMax] + "...'"
	}
	return "'" + text + "'"
}

// ---- dec, hex, base32 ----

// Crockford's alphabet: digits, then letters without I, L, O, U; in ASCII order.
const base32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// FormatDec is the ID in decimal.
func FormatDec(id uint64) string { return strconv.FormatUint(id, 10) }

// FormatHex is "0x" and 16 lower-case hex digits.
func FormatHex(id uint64) string { return fmt.Sprintf("0x%016x", id) }

// FormatBase32 is any 64-bit value as 13 Crockford base32 symbols (the opaque form writes its
// permuted number with it).
func FormatBase32(value uint64) string {
	var out [Base32Size]byte
	for i := range out {
		out[i] = base32Alphabet[(value>>(5*(Base32Size-1-i)))&31] // shift 60: the top 4 bits
	}
	return string(out[:])
}

// readDigits is 1..19 decimal digits and nothing else.
func readDigits(text string) (uint64, bool) {
	if len(text) == 0 || len(text) > DecSizeMax {
		return 0, false
	}
	var value uint64
	for _, c := range []byte(text) {
		if c < '0' || c > '9' {
			return 0, false
		}
		value = value*10 + uint64(c-'0')
	}
	return value, true
}

// ParseDec reads 1..19 decimal digits of a value below 2^63.
func ParseDec(text string) (uint64, error) {
	value, ok := readDigits(text)
	if !ok || value > IDMax {
		return 0, formError("%s is not a decimal ID (1 to 19 digits, below 2^63)", quoted(text))
	}
	return value, nil
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// ParseHex reads 0x or 0X and 1..16 hex digits of either case, below 2^63.
func ParseHex(text string) (uint64, error) {
	refuse := func() (uint64, error) {
		return 0, formError("%s is not a hexadecimal ID (0x and 1 to 16 hex digits, below 2^63)", quoted(text))
	}
	if len(text) <= 2 || len(text) > HexSize || text[0] != '0' || (text[1] != 'x' && text[1] != 'X') {
		return refuse()
	}
	var value uint64
	for _, c := range []byte(text[2:]) {
		digit := hexValue(c)
		if digit < 0 {
			return refuse()
		}
		value = value<<4 | uint64(digit)
	}
	if value > IDMax {
		return refuse()
	}
	return value, nil
}

// base32Symbol is the value of a Crockford symbol, with lower case and the aliases I, L -> 1
// and O -> 0; -1 for anything else (U included).
func base32Symbol(c byte) int {
	if c >= 'a' && c <= 'z' {
		c -= 'a' - 'A'
	}
	switch c {
	case 'I', 'L':
		c = '1'
	case 'O':
		c = '0'
	}
	return strings.IndexByte(base32Alphabet, c)
}

// ParseBase32 reads 13 Crockford symbols (lower case and the aliases I, L and O accepted) of a
// value below 2^63.
func ParseBase32(text string) (uint64, error) {
	if len(text) != Base32Size {
		return 0, formError("%s is not base32: it has %d chars, a base32 ID has 13", quoted(text), len(text))
	}
	var value uint64
	for i := 0; i < len(text); i++ {
		symbol := base32Symbol(text[i])
		if symbol < 0 {
			return 0, formError("%s is not base32: %q at position %d is not a Crockford symbol (0-9, A-Z but U)",
				quoted(text), text[i], i+1)
		}
		// 13 symbols carry 65 bits; an ID's 63 leave the first symbol 0..7.
		if i == 0 && symbol > 7 {
			return 0, formError("%s is not base32 of an ID: it is 2^63 or more (the first symbol must be 0-7)", quoted(text))
		}
		value = value<<5 | uint64(symbol)
	}
	return value, nil
}

// checkFits fails unless id fits the layout's time + node + sequence bits.
func (l Layout) checkFits(id uint64) error {
	if id > IDMax || !l.Fits(id) {
		return formError("ID %d has bits above the layout's %d bits; is it from another layout?", id,
			l.TimeBits+l.NodeBits+l.SequenceBits)
	}
	return nil
}

// endUnixMs is the layout's last instant, Unix milliseconds.
func (l Layout) endUnixMs() uint64 { return l.EpochMs + (mask(l.TimeBits)+1)*l.TimeUnitMs - 1 }

// utc is Unix milliseconds as a UTC time.
func utc(unixMs uint64) time.Time { return time.UnixMilli(int64(unixMs)).UTC() }

// isoUTC is Unix milliseconds as ISO-8601 UTC, e.g. "2024-01-01T00:00:00.000Z".
func isoUTC(unixMs uint64) string { return utc(unixMs).Format("2006-01-02T15:04:05.000Z") }

// ---- uuid ----
//
// An RFC 9562 version-7 UUID (128 bits, most significant first):
//
//	unix_ts_ms  48 bits  the ID's instant in Unix milliseconds (the layout's epoch + the ID's
//	                     time field x its unit: the instant the readable form writes)
//	ver          4 bits  7
//	rand_a      12 bits  } 74 bits that hold the 63-bit ID in their low 63 bits; the 11 bits
//	var          2 bits  } above it are 0 (var is 0b10, between rand_a and rand_b)
//	rand_b      62 bits  }
//
// written as 8-4-4-4-12 lower-case hex digits. Unique whenever the IDs are (the ID is inside
// it, bit for bit), sorts by time and then as the IDs of one layout, and decodes back to the
// ID; any UUIDv7 reader sees version 7, variant RFC 9562.

const (
	uuidVersion = 7
	uuidVariant = 0b10
	low62       = uint64(1)<<62 - 1
)

func uuidDashAt(i int) bool { return i == 8 || i == 13 || i == 18 || i == 23 }

// FormatUUID is the ID as an RFC 9562 version-7 UUID. Errors: the ID does not fit the layout,
// or its instant is past what 48 bits of milliseconds hold (the year 10889).
func (l Layout) FormatUUID(id uint64) (string, error) {
	if err := l.checkFits(id); err != nil {
		return "", err
	}
	unixMs := l.Decode(id).UnixMs
	if unixMs>>48 != 0 {
		return "", formError("ID %d is of %s, past what a UUID's 48 bits of milliseconds hold (the year 10889)", id,
			isoUTC(unixMs))
	}
	hi := unixMs<<16 | uuidVersion<<12 | id>>62
	lo := uuidVariant<<62 | id&low62
	const hexDigits = "0123456789abcdef"
	var out [UUIDSize]byte
	nibble := 0
	for i := range out {
		if uuidDashAt(i) {
			out[i] = '-'
			continue
		}
		word := lo
		if nibble < 16 {
			word = hi
		}
		out[i] = hexDigits[(word>>(60-4*(nibble%16)))&0xf]
		nibble++
	}
	return string(out[:]), nil
}

// ParseUUID reads a UUID that FormatUUID wrote with this layout (either case). Errors name
// the first thing wrong: the length, a dash or hex digit out of place, the version or
// variant, the bits above the ID not 0, an ID that does not fit the layout, or a unix_ts_ms
// that is not the ID's instant in this layout.
func (l Layout) ParseUUID(text string) (uint64, error) {
	if len(text) != UUIDSize {
		return 0, formError("%s is not a UUID: it has %d chars, a UUID has 36 (8-4-4-4-12 hex digits)", quoted(text), len(text))
	}
	var hi, lo uint64
	nibble := 0
	for i := 0; i < UUIDSize; i++ {
		if uuidDashAt(i) {
			if text[i] != '-' {
				return 0, formError("%s is not a UUID: position %d must be '-'", quoted(text), i+1)
			}
			continue
		}
		value := hexValue(text[i])
		if value < 0 {
			return 0, formError("%s is not a UUID: %q at position %d is not a hex digit", quoted(text), text[i], i+1)
		}
		if nibble < 16 {
			hi = hi<<4 | uint64(value)
		} else {
			lo = lo<<4 | uint64(value)
		}
		nibble++
	}
	if version := hi >> 12 & 0xf; version != uuidVersion {
		return 0, formError("%s is not a flurry UUID: its version is %d, flurry writes version 7", quoted(text), version)
	}
	if lo>>62 != uuidVariant {
		return 0, formError("%s is not a flurry UUID: its variant is not RFC 9562's (10 in binary)", quoted(text))
	}
	if hi>>1&0x7ff != 0 {
		return 0, formError("%s is not a flurry UUID: the 11 bits above the ID are not 0", quoted(text))
	}
	id := (hi&1)<<62 | lo&low62
	if err := l.checkFits(id); err != nil {
		return 0, formError("%s is not a UUID of this layout: %s", quoted(text), err.(*Error).Message)
	}
	if unixMs, want := hi>>16, l.Decode(id).UnixMs; unixMs != want {
		return 0, formError("%s is not a UUID of this layout: its time is %s, the ID inside it is of %s (another epoch or layout?)",
			quoted(text), isoUTC(unixMs), isoUTC(want))
	}
	return id, nil
}

// ---- readable ----

// ReadableForm writes and reads the readable form of one layout's IDs: TIME TAG REST, no
// delimiters, every part fixed width for the layout:
//
//	TIME  the ID's instant in UTC, truncated to the layout's unit: YY MM DD HH mm ss and then
//	      SSS (1 ms unit), SS (hundredths: 10 ms unit) or nothing (1 s unit). YY is two digits
//	      when the whole layout (epoch to its last instant) lies in 2000..2099, as for the
//	      snowflake and js-safe presets; otherwise the full year, zero-padded to the digits of
//	      the layout's last year (at least 4).
//	TAG   0..4 chars of A-Z and 0-9, given by the caller (a business tag such as "ORD").
//	REST  the bits below the time field (node, core, counter) as one decimal number,
//	      zero-padded to the digits of its largest value (7 for the snowflake layout).
//
// The TAG's length is what is left between TIME and REST, so it may hold digits. For one tag,
// string order is the numeric order of the IDs. Make one with NewReadableForm.
type ReadableForm struct {
	layout         Layout
	yearDigits     int // 2 (yy) or the full year's
	fractionDigits int // 3, 2 or 0 for 1 ms, 10 ms, 1 s
	restBits       uint
	restDigits     int
}

func decimalDigits(value uint64) int { return len(strconv.FormatUint(value, 10)) }

// NewReadableForm is the readable form of the layout's IDs. Errors: the layout fails Validate.
func NewReadableForm(l Layout) (*ReadableForm, error) {
	if err := l.Validate(); err != nil {
		return nil, formError("readable form: %v", err)
	}
	r := &ReadableForm{layout: l, yearDigits: 2, fractionDigits: 0, restBits: l.NodeBits + l.SequenceBits}
	first, last := utc(l.EpochMs).Year(), utc(l.endUnixMs()).Year()
	if first < 2000 || last > 2099 {
		r.yearDigits = decimalDigits(uint64(last))
		if r.yearDigits < 4 {
			r.yearDigits = 4
		}
	}
	switch l.TimeUnitMs {
	case 1:
		r.fractionDigits = 3
	case 10:
		r.fractionDigits = 2
	}
	r.restDigits = decimalDigits(mask(r.restBits))
	return r, nil
}

// Layout is the layout this form is of.
func (r *ReadableForm) Layout() Layout { return r.layout }

// Size is the length of a readable ID of this layout with a tag of tagSize chars.
func (r *ReadableForm) Size(tagSize int) int { return r.timeDigits() + tagSize + r.restDigits }

func (r *ReadableForm) timeDigits() int { return r.yearDigits + 10 + r.fractionDigits }

func checkTag(tag string) error {
	if len(tag) > TagSizeMax {
		return formError("tag %s is longer than 4 chars", quoted(tag))
	}
	for _, c := range []byte(tag) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return formError("tag %s may hold only A-Z and 0-9", quoted(tag))
		}
	}
	return nil
}

func pow10(exponent int) uint64 {
	value := uint64(1)
	for ; exponent > 0; exponent-- {
		value *= 10
	}
	return value
}

// appendDigits appends value as exactly width digits, zero-padded (the value must fit).
func appendDigits(out []byte, value uint64, width int) []byte {
	if width == 0 {
		return out
	}
	text := strconv.FormatUint(value, 10)
	for i := len(text); i < width; i++ {
		out = append(out, '0')
	}
	return append(out, text...)
}

// Format writes the ID with the tag ("" for none). Errors: the tag is not 0..4 chars of A-Z
// and 0-9, or the ID does not fit the layout.
func (r *ReadableForm) Format(id uint64, tag string) (string, error) {
	if err := r.layout.checkFits(id); err != nil {
		return "", err
	}
	if err := checkTag(tag); err != nil {
		return "", err
	}
	unixMs := r.layout.Decode(id).UnixMs
	t := utc(unixMs)
	out := make([]byte, 0, r.Size(len(tag)))
	year := uint64(t.Year())
	if r.yearDigits == 2 {
		year -= 2000
	}
	out = appendDigits(out, year, r.yearDigits)
	for _, field := range []int{int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()} {
		out = appendDigits(out, uint64(field), 2)
	}
	// Truncated to the unit: 3 digits of ms, 2 of hundredths, or none.
	out = appendDigits(out, unixMs%1000/pow10(3-r.fractionDigits), r.fractionDigits)
	out = append(out, tag...)
	out = appendDigits(out, id&mask(r.restBits), r.restDigits)
	return string(out), nil
}

// parseTime is the time field of TIME digits (length already checked).
func (r *ReadableForm) parseTime(digits string) (uint64, error) {
	at := 0
	take := func(width int) (uint64, bool) {
		if width == 0 {
			return 0, true
		}
		value, ok := readDigits(digits[at : at+width])
		at += width
		return value, ok
	}
	var fields [7]uint64 // year, month, day, hour, minute, second, fraction
	widths := [7]int{r.yearDigits, 2, 2, 2, 2, 2, r.fractionDigits}
	for i, width := range widths {
		value, ok := take(width)
		if !ok {
			return 0, fmt.Errorf("its first %d chars (the time) must be digits", r.timeDigits())
		}
		fields[i] = value
	}
	year := fields[0]
	if r.yearDigits == 2 {
		year += 2000
	}
	t := time.Date(int(year), time.Month(fields[1]), int(fields[2]), int(fields[3]), int(fields[4]), int(fields[5]), 0, time.UTC)
	// time.Date normalizes out-of-range fields: one that changed was out of range.
	if t.Unix() < 0 || uint64(t.Year()) != year || uint64(t.Month()) != fields[1] || uint64(t.Day()) != fields[2] ||
		uint64(t.Hour()) != fields[3] || uint64(t.Minute()) != fields[4] || uint64(t.Second()) != fields[5] {
		return 0, fmt.Errorf("its time %s is not a real UTC date and time", digits)
	}
	l := r.layout
	unixMs := uint64(t.Unix())*1000 + fields[6]*pow10(3-r.fractionDigits)
	firstUnit := l.EpochMs / l.TimeUnitMs
	if unixMs/l.TimeUnitMs < firstUnit || unixMs/l.TimeUnitMs-firstUnit > mask(l.TimeBits) {
		return 0, fmt.Errorf("its time %s is outside the layout (%s to %s)", isoUTC(unixMs), isoUTC(l.EpochMs),
			isoUTC(l.endUnixMs()))
	}
	return unixMs/l.TimeUnitMs - firstUnit, nil
}

// Parse reads a readable ID of this layout: the ID and its tag. Errors name the first thing
// wrong: the length, a non-digit, a date field out of range, a tag char, a REST above the
// layout's bits, an instant outside the layout.
func (r *ReadableForm) Parse(text string) (id uint64, tag string, err error) {
	bare := r.Size(0)
	if len(text) < bare || len(text) > bare+TagSizeMax {
		return 0, "", formError("%s is not a readable ID of this layout: it has %d chars, not %d to %d", quoted(text),
			len(text), bare, bare+TagSizeMax)
	}
	tagSize := len(text) - bare
	tag = text[r.timeDigits() : r.timeDigits()+tagSize]
	timeField, err := r.parseTime(text[:r.timeDigits()])
	if err != nil {
		return 0, "", formError("%s is not a readable ID: %v", quoted(text), err)
	}
	if err := checkTag(tag); err != nil {
		return 0, "", formError("%s is not a readable ID: %s", quoted(text), err.(*Error).Message)
	}
	rest, ok := readDigits(text[r.timeDigits()+tagSize:])
	if !ok || rest>>r.restBits != 0 {
		return 0, "", formError("%s is not a readable ID: its last %d chars must be a number below 2^%d", quoted(text),
			r.restDigits, r.restBits)
	}
	return timeField<<r.restBits | rest, tag, nil
}

// ---- opaque ----

// OpaqueKey is a key of the opaque form: a keyed permutation of [0, 2^63), an unbalanced
// Feistel network of OpaqueRounds rounds over a 31-bit left half L (bits 62..32) and a 32-bit
// right half R (bits 31..0). Round i (0-based) maps (L, R) of widths (a, b) to
// (R, L xor F_i(R) mod 2^a), so the widths swap every round and, the rounds being even, end as
// (31, 32) again. F_i(R) is SipHash-2-4 keyed with the 16-byte secret of the 8 bytes
// little-endian of R | i << 32 | 0x66 << 56, read as a little-endian 64-bit number. Each round
// is invertible, so the whole is a permutation; Decrypt runs the rounds backwards.
// Consecutive IDs map to unrelated numbers; without the key the number reveals neither time
// nor volume. Printed with fmt (any verb) it shows its id only.
type OpaqueKey struct {
	id     string
	secret [SecretSize]byte
}

func validKeyID(id string) bool {
	if len(id) < 1 || len(id) > KeyIDSizeMax {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// NewOpaqueKey is the key `id` (1..8 chars of a-z and 0-9) with this secret. Errors: a bad id,
// or a secret of all zeros.
func NewOpaqueKey(id string, secret [SecretSize]byte) (*OpaqueKey, error) {
	if !validKeyID(id) {
		return nil, formError("key id %s must be 1 to 8 chars of a-z and 0-9", quoted(id))
	}
	if secret == [SecretSize]byte{} {
		return nil, formError("key %s: the secret is all zero; generate one with: head -c 16 /dev/urandom | xxd -p", id)
	}
	return &OpaqueKey{id: id, secret: secret}, nil
}

// ID is the key's id, the prefix of the opaque strings it writes.
func (k *OpaqueKey) ID() string { return k.id }

// String names the key id only: e.g. OpaqueKey(k1).
func (k *OpaqueKey) String() string { return "OpaqueKey(" + k.id + ")" }

// Format makes every verb print String, so the secret never shows.
func (k *OpaqueKey) Format(f fmt.State, verb rune) { io.WriteString(f, k.String()) } //nolint:errcheck

// hasID is whether id is this key's id, ignoring case.
func (k *OpaqueKey) hasID(id string) bool { return strings.EqualFold(id, k.id) }

const (
	halfRightBits = 32
	domainByte    = 0x66 // 'f'
)

// round is F_i(half).
func (k *OpaqueKey) round(i int, half uint64) uint64 {
	var message [8]byte
	binary.LittleEndian.PutUint64(message[:], half|uint64(i)<<32|domainByte<<56)
	mac := siphash24(&k.secret, message[:])
	return binary.LittleEndian.Uint64(mac[:])
}

// leftBitsBefore is the width of the left half before round i: 31 before even rounds, 32
// before odd ones.
func leftBitsBefore(i int) uint {
	if i%2 == 0 {
		return 63 - halfRightBits
	}
	return halfRightBits
}

// Encrypt permutes x (at most IDMax) into [0, 2^63). It panics for a larger x: not an ID.
func (k *OpaqueKey) Encrypt(x uint64) uint64 {
	if x > IDMax {
		panic("flurry: opaque encrypt of a value of 2^63 or more")
	}
	left, right := x>>halfRightBits, x&mask(halfRightBits)
	for i := 0; i < OpaqueRounds; i++ {
		left, right = right, (left^k.round(i, right))&mask(leftBitsBefore(i))
	}
	return left<<halfRightBits | right
}

// Decrypt is Encrypt's inverse. It panics for y above IDMax.
func (k *OpaqueKey) Decrypt(y uint64) uint64 {
	if y > IDMax {
		panic("flurry: opaque decrypt of a value of 2^63 or more")
	}
	left, right := y>>halfRightBits, y&mask(halfRightBits)
	for i := OpaqueRounds - 1; i >= 0; i-- {
		left, right = (right^k.round(i, left))&mask(leftBitsBefore(i)), left
	}
	return left<<halfRightBits | right
}

// FormatID is "<key id>_" and 13 base32 symbols of Encrypt(id). Errors: id above IDMax.
func (k *OpaqueKey) FormatID(id uint64) (string, error) {
	if id > IDMax {
		return "", formError("ID %d is 2^63 or more", id)
	}
	return k.id + "_" + FormatBase32(k.Encrypt(id)), nil
}

// ParseID reads an opaque string this key wrote (its key id in either case, lower-case
// base32 and its aliases accepted). Errors: another key's string, or a malformed one.
func (k *OpaqueKey) ParseID(text string) (uint64, error) {
	keyID, err := OpaqueKeyID(text)
	if err != nil {
		return 0, err
	}
	if !k.hasID(keyID) {
		return 0, formError("%s was made with key '%s', not '%s'", quoted(text), keyID, k.id)
	}
	value, err := ParseBase32(text[len(keyID)+1:])
	if err != nil {
		return 0, formError("opaque ID %s", err.(*Error).Message)
	}
	return k.Decrypt(value), nil
}

// OpaqueKeyID is the key id an opaque string names ("k1" of "k1_2TJVZN1P765Y3"). Errors: the
// text is not KEYID_ and 13 base32 chars.
func OpaqueKeyID(text string) (string, error) {
	separator := strings.IndexByte(text, '_')
	ok := separator > 0 && separator <= KeyIDSizeMax && len(text) == separator+1+Base32Size
	for i := 0; ok && i < separator; i++ {
		c := text[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !ok {
		return "", formError("%s is not an opaque ID (KEYID_ and 13 base32 chars, e.g. k1_2TJVZN1P765Y3)", quoted(text))
	}
	return text[:separator], nil
}

// ---- any form ----

// FormOptions are what a form needs beyond the ID: the layout (readable and uuid), a tag
// (readable, formatting only) and a key ring (opaque: its current key encodes; decoding picks
// the key the text names).
type FormOptions struct {
	Layout *Layout
	Tag    string
	Keys   *OpaqueKeyRing
}

// Parsed is an ID read from text.
type Parsed struct {
	Form  Form
	ID    uint64
	Tag   string // readable: the tag ("" for none); other forms ""
	KeyID string // opaque: the key id as written; other forms ""
}

func (o FormOptions) check(form Form) error {
	if (form == FormReadable || form == FormUUID) && o.Layout == nil {
		return formError("the %v form needs the ID layout", form)
	}
	if form == FormOpaque && o.Keys == nil {
		return formError("the opaque form needs a key file")
	}
	return nil
}

// FormatAs writes id in form. Errors: those of the form's own function, options lacking what
// the form needs, a tag with any form but readable, an ID above IDMax.
func FormatAs(form Form, id uint64, opts FormOptions) (string, error) {
	if err := opts.check(form); err != nil {
		return "", err
	}
	if form != FormReadable && opts.Tag != "" {
		return "", formError("a tag is part of the readable form only")
	}
	if id > IDMax {
		return "", formError("ID %d is 2^63 or more", id)
	}
	switch form {
	case FormDec:
		return FormatDec(id), nil
	case FormHex:
		return FormatHex(id), nil
	case FormBase32:
		return FormatBase32(id), nil
	case FormReadable:
		readable, err := NewReadableForm(*opts.Layout)
		if err != nil {
			return "", err
		}
		return readable.Format(id, opts.Tag)
	case FormOpaque:
		return opts.Keys.Current().FormatID(id)
	case FormUUID:
		return opts.Layout.FormatUUID(id)
	}
	return "", formError("unknown form %d", form)
}

// ParseAs reads text in form. Errors: those of the form's own parser, or options lacking what
// the form needs.
func ParseAs(form Form, text string, opts FormOptions) (Parsed, error) {
	if err := opts.check(form); err != nil {
		return Parsed{}, err
	}
	parsed := Parsed{Form: form}
	var err error
	switch form {
	case FormDec:
		parsed.ID, err = ParseDec(text)
	case FormHex:
		parsed.ID, err = ParseHex(text)
	case FormBase32:
		parsed.ID, err = ParseBase32(text)
	case FormOpaque:
		if parsed.ID, err = opts.Keys.Decode(text); err == nil {
			parsed.KeyID = text[:strings.IndexByte(text, '_')]
		}
	case FormUUID:
		parsed.ID, err = opts.Layout.ParseUUID(text)
	case FormReadable:
		var readable *ReadableForm
		if readable, err = NewReadableForm(*opts.Layout); err == nil {
			parsed.ID, parsed.Tag, err = readable.Parse(text)
		}
	default:
		err = formError("unknown form %d", form)
	}
	if err != nil {
		return Parsed{}, err
	}
	return parsed, nil
}

// ParseAny reads text in whichever form reads it: hex (0x...), dec, base32, readable and uuid
// (with opts.Layout) or opaque (KEYID_..., with opts.Keys). Errors: no form reads it (naming
// the likeliest form's reason), or two do (a 13-digit number is both dec and base32): then
// say which with ParseAs.
func ParseAny(text string, opts FormOptions) (Parsed, error) {
	likeliest := FormDec // the form whose reason to report when nothing reads the text
	if len(text) > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X') {
		likeliest = FormHex
	}
	if _, err := OpaqueKeyID(text); err == nil {
		likeliest = FormOpaque
	}
	if len(text) == Base32Size {
		likeliest = FormBase32
	}
	if opts.Layout != nil && len(text) > DecSizeMax {
		likeliest = FormReadable
	}
	if opts.Layout != nil && len(text) == UUIDSize && strings.Contains(text, "-") {
		likeliest = FormUUID
	}
	var found *Parsed
	for _, form := range []Form{FormHex, FormDec, FormBase32, FormReadable, FormOpaque, FormUUID} {
		if opts.check(form) != nil {
			continue
		}
		parsed, err := ParseAs(form, text, opts)
		if err != nil {
			continue
		}
		if found != nil {
			return Parsed{}, formError("'%s' reads as %v (%d) and as %v (%d); say which form it is", text, found.Form,
				found.ID, form, parsed.ID)
		}
		found = &parsed
	}
	if found != nil {
		return *found, nil
	}
	_, err := ParseAs(likeliest, text, opts)
	if err == nil { // a form that reads the text was found above
		panic("flurry: ParseAny found no form but the likeliest reads the text")
	}
	return Parsed{}, err
}
