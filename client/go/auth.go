// auth.go — signed requests and answers (proto/PROTOCOL.md "Authentication"), as the C++
// client's proto/auth.cc: a signed request ends with the 24-byte trailer key id (u32), server
// (u32: the node id of the server it is for, or AnyServer), timestamp (u64, microseconds since
// the Unix epoch), MAC (8 bytes) = SipHash-2-4 keyed with the key's 16-byte secret over every
// byte before the MAC; the answer to it ends with 8 MAC bytes = SipHash-2-4 over (the answer's
// bytes before them, then the request's 8 MAC bytes).
//
// SipHash-2-4 is written here (the package depends on the standard library only) and gives
// the 8 bytes as libsodium's crypto_shorthash writes them: the 64-bit result little-endian.
// Pure: no I/O, no clock.

package flurry

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// Sizes of PROTOCOL.md "Authentication".
const (
	AuthTrailerSize      = 24 // key id, server, timestamp_us, MAC
	MacSize              = 8  // a request's or an answer's MAC
	SecretSize           = 16 // a key's SipHash-2-4 secret
	SignedRequestSizeMin = RequestHeaderSize + AuthTrailerSize
	// A signed answer is the unsigned answer and its MAC: never shorter than this.
	signedAnswerSizeMin = ResponseHeaderSize + MacSize
	// A signed request's server field when the client does not know the server's node id yet:
	// PING and INFO are served, GET_IDS and GET_SEQ answered wrong_server naming the node.
	AnyServer = 0xFFFFFFFF
)

// Key is an authentication key: with Options.Key set every request is signed with it and only
// answers whose MAC verifies are accepted. Printed with fmt (any verb, a Key or a *Key, alone
// or inside Options) it shows its id only, so a logged key or Options never leaks the secret.
type Key struct {
	ID     uint32           // the key id of the server's key file
	Secret [SecretSize]byte // the SipHash-2-4 secret
}

// String names the key id only: e.g. Key(id=7).
func (k Key) String() string { return fmt.Sprintf("Key(id=%d)", k.ID) }

// GoString (%#v) is Go syntax without the secret: flurry.Key{ID: 7 /* Secret hidden */}.
func (k Key) GoString() string { return fmt.Sprintf("flurry.Key{ID: %d /* Secret hidden */}", k.ID) }

// Format makes every verb print String (GoString for %#v): without it %d, %x and the like
// would print the fields, the secret's bytes among them.
func (k Key) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, k.GoString())
		return
	}
	io.WriteString(f, k.String())
}

// siphash24 is SipHash-2-4 (Aumasson and Bernstein) of data keyed with secret.
func siphash24(secret *[SecretSize]byte, data []byte) [MacSize]byte {
	k0 := binary.LittleEndian.Uint64(secret[0:])
	k1 := binary.LittleEndian.Uint64(secret[8:])
	v0, v1, v2, v3 := k0^0x736f6d6570736575, k1^0x646f72616e646f6d, k0^0x6c7967656e657261, k1^0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	compress := func(m uint64) {
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	full := len(data) &^ 7
	for i := 0; i < full; i += 8 {
		compress(binary.LittleEndian.Uint64(data[i:]))
	}
	last := uint64(len(data)) << 56 // the length's low byte, then the tail bytes
	for i, b := range data[full:] {
		last |= uint64(b) << (8 * i)
	}
	compress(last)
	v2 ^= 0xff
	for i := 0; i < 4; i++ {
		round()
	}
	var out [MacSize]byte
	binary.LittleEndian.PutUint64(out[:], v0^v1^v2^v3)
	return out
}

// encodeSignedRequest writes a signed request of `size` bytes: the header with flag_auth set,
// GET_SEQ's name, zero padding, the trailer (signed for node `server`, or AnyServer). `size`
// grows where the body and the trailer need more (never past what a GET_SEQ name of
// SeqNameSizeMax needs). Returns the request and its MAC, which the answer's MAC covers.
func encodeSignedRequest(op Opcode, count uint32, requestID uint64, name string, size int, key *Key,
	server uint32, timestampUs uint64) ([]byte, [MacSize]byte) {
	body := RequestHeaderSize
	if op == OpGetSeq {
		body += 1 + len(name)
	}
	if size < body+AuthTrailerSize {
		size = body + AuthTrailerSize
	}
	var out []byte
	if op == OpGetSeq {
		out = encodeSeqRequest(flagAuth, count, requestID, name, size)
	} else {
		out = encodeRequest(uint8(op), flagAuth, count, requestID, size)
	}
	trailer := out[size-AuthTrailerSize:]
	binary.BigEndian.PutUint32(trailer[0:], key.ID)
	binary.BigEndian.PutUint32(trailer[4:], server)
	binary.BigEndian.PutUint64(trailer[8:], timestampUs)
	mac := siphash24(&key.Secret, out[:size-MacSize])
	copy(trailer[16:], mac[:])
	return out, mac
}

// answerMac is the MAC a signed answer whose bytes before the MAC are `body` must end with.
func answerMac(body []byte, requestMac [MacSize]byte, key *Key) [MacSize]byte {
	input := make([]byte, 0, len(body)+MacSize)
	input = append(append(input, body...), requestMac[:]...)
	return siphash24(&key.Secret, input)
}

// verifyAnswer is true when answer is at least 28 bytes (a header and a MAC), no longer than
// a datagram, and ends with the right MAC for the request whose MAC was requestMac. The caller
// then decodes answer[:len(answer)-MacSize].
func verifyAnswer(answer []byte, requestMac [MacSize]byte, key *Key) bool {
	if len(answer) < signedAnswerSizeMin || len(answer) > DatagramSizeMax {
		return false
	}
	body := len(answer) - MacSize
	want := answerMac(answer[:body], requestMac, key)
	// Compared whole: no early exit on the first differing byte.
	return subtle.ConstantTimeCompare(want[:], answer[body:]) == 1
}
