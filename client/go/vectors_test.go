// vectors_test.go — PROTOCOL.md's test vectors, read at run time (FLURRY_PROTOCOL_MD, set by
// meson; else ../../proto/PROTOCOL.md) and checked both ways: request vectors with
// `encode: yes` are encoded byte for byte, every request is decoded by the server-side rules of
// the fake server, every response decodes to its `decode:` result with its fields, ranges and
// INFO body (and encodes back to its bytes when it decodes ok), every answer is accepted by the
// client as the answer to its request, every `kind: id` vector decodes and composes, and every
// `kind: signed` request is signed byte for byte from its key, fields and timestamp, its answer
// verifies with the request's MAC and no longer does with any byte flipped. Every vector is
// counted; the test fails if a block was not checked or none was found.
package flurry

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

type vector struct {
	name  string
	line  int
	kind  string
	multi map[string][]string // every key: its values in order (hex and range repeat)
}

func (v *vector) get(key string) string {
	if values := v.multi[key]; len(values) > 0 {
		return values[0]
	}
	return ""
}

func protocolPath() string {
	if path := os.Getenv("FLURRY_PROTOCOL_MD"); path != "" {
		return path
	}
	return "../../proto/PROTOCOL.md"
}

// readVectors returns every fenced block of PROTOCOL.md whose first line is `vector: NAME`, and
// the count the file's closing `<!-- N vectors -->` comment states (-1 if none).
func readVectors(t *testing.T) ([]*vector, int) {
	t.Helper()
	data, err := os.ReadFile(protocolPath())
	if err != nil {
		t.Fatalf("cannot read the protocol (set FLURRY_PROTOCOL_MD): %v", err)
	}
	var vectors []*vector
	var current *vector
	inFence, first := false, false
	stated := -1
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(text, "```") {
			inFence, first, current = !inFence, true, nil
			continue
		}
		if !inFence {
			if m := regexp.MustCompile(`^<!-- (\d+) vectors -->$`).FindStringSubmatch(text); m != nil {
				stated, _ = strconv.Atoi(m[1])
			}
			continue
		}
		key, value, found := strings.Cut(text, ":")
		value = strings.TrimSpace(value)
		if first {
			first = false
			if found && key == "vector" {
				current = &vector{name: value, line: line, multi: map[string][]string{}}
				vectors = append(vectors, current)
			}
			continue
		}
		if current == nil {
			continue
		}
		if !found {
			t.Fatalf("PROTOCOL.md:%d: vector %s: line %q is not `key: value`", line, current.name, text)
		}
		current.multi[key] = append(current.multi[key], value)
		if key == "kind" {
			current.kind = value
		}
	}
	return vectors, stated
}

// fields parses "a=1 b=0x2 c=name" into strings.
func fields(text string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Fields(text) {
		k, v, _ := strings.Cut(item, "=")
		out[k] = v
	}
	return out
}

func number(t *testing.T, v *vector, text string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(text, 0, 64)
	if err != nil {
		t.Fatalf("vector %s: %q is not a number", v.name, text)
	}
	return n
}

// vectorBytes concatenates the hex lines and checks them against size.
func vectorBytes(t *testing.T, v *vector) []byte {
	t.Helper()
	joined := strings.ReplaceAll(strings.Join(v.multi["hex"], ""), " ", "")
	b, err := hex.DecodeString(joined)
	if err != nil {
		t.Fatalf("vector %s: hex: %v", v.name, err)
	}
	if size := number(t, v, v.get("size")); uint64(len(b)) != size {
		t.Errorf("vector %s: %d bytes, size says %d", v.name, len(b), size)
	}
	return b
}

// checkFields compares what `fields:` states with `got`, key by key; every key must be known.
func checkFields(t *testing.T, v *vector, got map[string]uint64) {
	t.Helper()
	for key, text := range fields(v.get("fields")) {
		want, known := got[key]
		if !known {
			t.Errorf("vector %s: unknown field %s", v.name, key)
		} else if n := number(t, v, text); n != want {
			t.Errorf("vector %s: %s = %d, the bytes say %d", v.name, key, n, want)
		}
	}
}

type vectorCounts struct {
	requests, encoded, responses, decodedOK, rejected, answers, ids, servers, signed int
	signedRequests, signedAnswers                                                    int
}

func TestVectors(t *testing.T) {
	counted(t)
	vectors, stated := readVectors(t)
	byName := map[string]*vector{}
	for _, v := range vectors {
		if byName[v.name] != nil {
			t.Errorf("vector %s appears twice", v.name)
		}
		byName[v.name] = v
	}
	var n vectorCounts
	for _, v := range vectors {
		switch v.kind {
		case "request":
			checkRequestVector(t, v, byName, &n)
		case "response":
			checkResponseVector(t, v, &n)
		case "id":
			checkIDVector(t, v)
			n.ids++
		case "server":
			checkServerVector(t, v)
			n.servers++
		case "signed":
			checkSignedVector(t, v, byName, &n)
		default:
			t.Errorf("PROTOCOL.md:%d: vector %s has unknown kind %q: not checked", v.line, v.name, v.kind)
		}
	}
	checked := n.requests + n.responses + n.ids + n.servers + n.signed
	t.Logf("%d vectors in %s: %d requests (%d encoded byte for byte, %d answers accepted by the client), "+
		"%d responses (%d decode ok and re-encode, %d rejected with the named rule), %d ids, %d servers, "+
		"%d signed (%d requests signed byte for byte, %d answers verified)",
		len(vectors), protocolPath(), n.requests, n.encoded, n.answers, n.responses, n.decodedOK, n.rejected, n.ids, n.servers,
		n.signed, n.signedRequests, n.signedAnswers)
	if checked == 0 || n.encoded == 0 || n.decodedOK == 0 || n.rejected == 0 || n.ids == 0 ||
		n.signedRequests == 0 || n.signedAnswers == 0 {
		t.Fatalf("a kind of vector was not found or not checked: %+v", n)
	}
	if checked != len(vectors) {
		t.Errorf("%d vectors found, %d checked", len(vectors), checked)
	}
	if stated >= 0 && stated != len(vectors) {
		t.Errorf("PROTOCOL.md says %d vectors, %d were found", stated, len(vectors))
	}
}

func checkRequestVector(t *testing.T, v *vector, byName map[string]*vector, n *vectorCounts) {
	n.requests++
	b := vectorBytes(t, v)
	r, decoded := decodeRequest(b)
	if len(b) >= RequestHeaderSize {
		checkFields(t, v, map[string]uint64{"opcode": uint64(r.opcode), "flags": uint64(r.flags),
			"count": uint64(r.count), "request_id": r.id})
	}
	if want := v.get("decode"); decoded != want {
		t.Errorf("vector %s: decodes as %s, PROTOCOL.md says %s", v.name, decoded, want)
	}
	handling := "answered"
	if decoded == "too_short" || decoded == "bad_magic" || decoded == "too_long" || decoded == "is_response" {
		handling = "dropped"
	}
	if want := v.get("handling"); handling != want {
		t.Errorf("vector %s: handling %s, PROTOCOL.md says %s", v.name, handling, want)
	}
	switch v.get("encode") {
	case "yes":
		n.encoded++
		got := encodeRequest(r.opcode, r.flags, r.count, r.id, len(b))
		if Opcode(r.opcode) == OpGetSeq {
			got = encodeSeqRequest(r.flags, r.count, r.id, v.get("name"), len(b))
		}
		if !bytes.Equal(got, b) {
			t.Errorf("vector %s: encodes as % x, PROTOCOL.md says % x", v.name, got, b)
		}
	case "no":
	default:
		t.Errorf("vector %s: encode: %q is neither yes nor no", v.name, v.get("encode"))
	}
	answerName := v.get("answer")
	if (answerName == "none") != (handling == "dropped") {
		t.Errorf("vector %s: handling %s but answer %s", v.name, handling, answerName)
	}
	if answerName == "none" {
		return
	}
	answer := byName[answerName]
	if answer == nil || answer.kind != "response" {
		t.Errorf("vector %s: answer %s is not a response vector", v.name, answerName)
		return
	}
	ab := vectorBytes(t, answer)
	if len(ab) > ResponseSizeMax(len(b)) {
		t.Errorf("vector %s: answer of %d bytes to %d is more than 3x", v.name, len(ab), len(b))
	}
	// Rules 13..15 with the request: the client takes this answer for its own.
	if _, ok := (&exchange{}).accept(ab, Opcode(r.opcode), r.count, r.id); !ok {
		t.Errorf("vector %s: the client does not accept %s as its answer", v.name, answerName)
	}
	n.answers++
}

func checkResponseVector(t *testing.T, v *vector, n *vectorCounts) {
	n.responses++
	b := vectorBytes(t, v)
	if len(b) >= ResponseHeaderSize {
		h := readResponseHeader(b)
		checkFields(t, v, map[string]uint64{"opcode": uint64(h.Opcode), "status": uint64(h.Status),
			"range_count": uint64(h.RangeCount), "node": uint64(h.Node), "request_id": h.RequestID, "detail": uint64(h.Detail)})
	}
	got := DecodeResponse(b)
	if want := v.get("decode"); got.Err.String() != want {
		t.Errorf("vector %s: decodes as %s, PROTOCOL.md says %s", v.name, got.Err, want)
		return
	}
	if got.Err != RespOK {
		n.rejected++
		return
	}
	n.decodedOK++
	var ranges []Range
	for _, text := range v.multi["range"] {
		f := fields(text)
		ranges = append(ranges, Range{First: number(t, v, f["first"]), Count: uint32(number(t, v, f["count"]))})
	}
	if !reflect.DeepEqual(got.Ranges, ranges) {
		t.Errorf("vector %s: ranges %v, PROTOCOL.md says %v", v.name, got.Ranges, ranges)
	}
	var info *Info
	if text := v.get("info"); text != "" {
		f := fields(text)
		num := func(k string) uint64 { return number(t, v, f[k]) }
		info = &Info{EpochMs: num("epoch_ms"), TimeUnitMs: uint16(num("time_unit_ms")), TimeBits: uint8(num("time_bits")),
			NodeBits: uint8(num("node_bits")), SequenceBits: uint8(num("sequence_bits")), CoreBits: uint8(num("core_bits")),
			CoreFrom: uint8(num("core_from")), Workers: uint8(num("workers"))}
		if got.Info != *info {
			t.Errorf("vector %s: info %+v, PROTOCOL.md says %+v", v.name, got.Info, *info)
		}
		if err := got.Info.Layout().Validate(); err != nil {
			t.Errorf("vector %s: the INFO layout is not valid: %v", v.name, err)
		}
	}
	if encoded := encodeResponse(got.Header, ranges, info); !bytes.Equal(encoded, b) {
		t.Errorf("vector %s: encodes as % x, PROTOCOL.md says % x", v.name, encoded, b)
	}
}

// macOf parses `0x` and 16 hex digits: the MAC's bytes in the order they are sent.
func macOf(t *testing.T, v *vector, text string) [MacSize]byte {
	var mac [MacSize]byte
	binary.BigEndian.PutUint64(mac[:], number(t, v, text))
	return mac
}

// checkSignedVector checks a signed request (it has `key:`) or a signed answer (`request_mac:`).
// A request: encoding its fields with its key and timestamp gives its bytes, its MAC is the
// trailer's, the server side (checkSigned) accepts it and refuses it with any byte flipped, and
// its `answer:` is accepted by a client that sent it. An answer: it verifies with its
// request_mac, decodes without its MAC to its fields, and fails with any byte flipped.
func checkSignedVector(t *testing.T, v *vector, byName map[string]*vector, n *vectorCounts) {
	n.signed++
	b := vectorBytes(t, v)
	if v.get("request_mac") != "" {
		for _, request := range byName { // the answer is keyed with its request's key
			if request.kind == "signed" && request.get("answer") == v.name {
				key := keyOf(t, request)
				checkSignedAnswer(t, v, b, macOf(t, v, v.get("request_mac")), &key)
				n.signedAnswers++
				return
			}
		}
		t.Errorf("vector %s: no signed request names it as its answer", v.name)
		return
	}
	n.signedRequests++
	key, tf, f := keyOf(t, v), fields(v.get("trailer")), fields(v.get("fields"))
	if number(t, v, tf["key_id"]) != uint64(key.ID) {
		t.Errorf("vector %s: trailer key_id %s is not the key's %d", v.name, tf["key_id"], key.ID)
	}
	if number(t, v, f["flags"]) != flagAuth {
		t.Errorf("vector %s: flags %s: a signed request has flag_auth alone", v.name, f["flags"])
	}
	op, count, id := Opcode(number(t, v, f["opcode"])), uint32(number(t, v, f["count"])), number(t, v, f["request_id"])
	server, stamp := number(t, v, tf["server"]), number(t, v, tf["timestamp_us"])
	if server > AnyServer {
		t.Fatalf("vector %s: trailer server %d is not 32 bits", v.name, server)
	}
	got, mac := encodeSignedRequest(op, count, id, "", len(b), &key, uint32(server), stamp)
	if !bytes.Equal(got, b) {
		t.Errorf("vector %s: signs as % x, PROTOCOL.md says % x", v.name, got, b)
	}
	if want := macOf(t, v, tf["mac"]); mac != want {
		t.Errorf("vector %s: MAC % x, the trailer says % x", v.name, mac, want)
	}
	if _, trailer, refused := checkSigned(b, &key); refused != "" || trailer.mac != mac || uint64(trailer.server) != server ||
		trailer.timestampUs != stamp {
		t.Errorf("vector %s: the server side refuses it (%s) or reads another trailer (%+v)", v.name, refused, trailer)
	}
	for i := range b {
		flipped := append([]byte(nil), b...)
		flipped[i] ^= 0x01
		if _, _, refused := checkSigned(flipped, &key); refused == "" {
			t.Errorf("vector %s: accepted with byte %d flipped", v.name, i)
		}
	}
	answer := byName[v.get("answer")]
	if answer == nil || answer.kind != "signed" || macOf(t, answer, answer.get("request_mac")) != mac {
		t.Errorf("vector %s: answer %s is not a signed answer to it", v.name, v.get("answer"))
		return
	}
	ab := vectorBytes(t, answer)
	checkSignedRefusal(t, v, answer, ab, server, stamp)
	x := &exchange{key: &key, requestMac: mac}
	if _, ok := x.accept(ab, op, count, id); !ok || x.counters.unverified.Load() != 0 {
		t.Errorf("vector %s: the client does not accept %s as its answer", v.name, answer.name)
	}
	if _, ok := x.accept(ab[:len(ab)-MacSize], op, count, id); ok || x.counters.unverified.Load() != 1 {
		t.Errorf("vector %s: the client accepts %s without its MAC", v.name, answer.name)
	}
}

// checkSignedRefusal checks that what the answer to a signed request says follows from the
// request and the server's clock (`server_clock_ms`, that of the reference server at node 5):
// stale_timestamp exactly when the timestamp is more than the 5 s window away from the clock;
// else wrong_server exactly when a GET_IDS or GET_SEQ names another node (AnyServer included),
// its header naming the server's node, which the client then signs for.
func checkSignedRefusal(t *testing.T, request, answer *vector, ab []byte, server, stampUs uint64) {
	const windowMs, referenceNode = 5000, 5
	clock := number(t, request, request.get("server_clock_ms"))
	h := readResponseHeader(ab)
	op := Opcode(h.Opcode)
	stale := stampUs/1000+windowMs < clock || stampUs/1000 > clock+windowMs
	wrong := !stale && (op == OpGetIDs || op == OpGetSeq) && server != referenceNode
	refusedStale := h.Status == StatusUnauthorized && h.Detail == errStaleTimestamp
	refusedWrong := h.Status == StatusUnauthorized && h.Detail == errWrongServer
	if stale != refusedStale || wrong != refusedWrong {
		t.Errorf("vector %s: stamped %d us for server %d at the clock %d ms: answered %v detail %d", request.name,
			stampUs, server, clock, h.Status, h.Detail)
	}
	if refusedWrong && h.Node != referenceNode {
		t.Errorf("vector %s: wrong_server names node %d, not the server's %d", answer.name, h.Node, referenceNode)
	}
}

// keyOf parses `key: id=7 secret=HEX`.
func keyOf(t *testing.T, v *vector) Key {
	f := fields(v.get("key"))
	key := Key{ID: uint32(number(t, v, f["id"]))}
	secret, err := hex.DecodeString(f["secret"])
	if err != nil || len(secret) != SecretSize {
		t.Fatalf("vector %s: secret %q is not %d bytes of hex", v.name, f["secret"], SecretSize)
	}
	copy(key.Secret[:], secret)
	return key
}

func checkSignedAnswer(t *testing.T, v *vector, b []byte, requestMac [MacSize]byte, key *Key) {
	if want := macOf(t, v, v.get("answer_mac")); len(b) < MacSize || !bytes.Equal(b[len(b)-MacSize:], want[:]) {
		t.Errorf("vector %s: does not end with its answer_mac", v.name)
	}
	if !verifyAnswer(b, requestMac, key) {
		t.Errorf("vector %s: does not verify with request_mac", v.name)
	}
	body := b[:len(b)-MacSize]
	if signed := signAnswer(body, request{trailer: trailer{mac: requestMac}}, key); !bytes.Equal(signed, b) {
		t.Errorf("vector %s: signs as % x, PROTOCOL.md says % x", v.name, signed, b)
	}
	for i := range b {
		flipped := append([]byte(nil), b...)
		flipped[i] ^= 0x80
		if verifyAnswer(flipped, requestMac, key) {
			t.Errorf("vector %s: verifies with byte %d flipped", v.name, i)
		}
	}
	otherRequest := requestMac
	otherRequest[0] ^= 0x01
	if verifyAnswer(b, otherRequest, key) {
		t.Errorf("vector %s: verifies as the answer to another request", v.name)
	}
	got := DecodeResponse(body)
	if got.Err != RespOK {
		t.Errorf("vector %s: without its MAC decodes as %s", v.name, got.Err)
		return
	}
	h := got.Header
	checkFields(t, v, map[string]uint64{"opcode": uint64(h.Opcode), "status": uint64(h.Status),
		"range_count": uint64(h.RangeCount), "node": uint64(h.Node), "request_id": h.RequestID, "detail": uint64(h.Detail)})
}

// layoutOf parses `layout: time_bits=41 ... core_from=sequence epoch_ms=... time_unit_ms=1`.
func layoutOf(t *testing.T, v *vector) Layout {
	f := fields(v.get("layout"))
	num := func(k string) uint64 { return number(t, v, f[k]) }
	l := Layout{TimeBits: uint(num("time_bits")), NodeBits: uint(num("node_bits")), SequenceBits: uint(num("sequence_bits")),
		CoreBits: uint(num("core_bits")), EpochMs: num("epoch_ms"), TimeUnitMs: num("time_unit_ms")}
	switch f["core_from"] {
	case "sequence":
	case "node":
		l.CoreFrom = CoreFromNode
	default:
		t.Errorf("vector %s: core_from %q", v.name, f["core_from"])
	}
	return l
}

func checkIDVector(t *testing.T, v *vector) {
	l := layoutOf(t, v)
	if err := l.Validate(); err != nil {
		t.Errorf("vector %s: layout: %v", v.name, err)
	}
	id := number(t, v, v.get("id"))
	if h := number(t, v, v.get("id_hex")); h != id {
		t.Errorf("vector %s: id %d and id_hex %#x differ", v.name, id, h)
	}
	d := l.Decode(id)
	checkFields(t, v, map[string]uint64{"time": d.Time, "unix_ms": d.UnixMs, "node": uint64(d.Node),
		"core": uint64(d.Core), "counter": uint64(d.Counter)})
	f := fields(v.get("fields"))
	composed := l.Compose(number(t, v, f["time"]), uint32(number(t, v, f["node"])), uint32(number(t, v, f["core"])),
		uint32(number(t, v, f["counter"])))
	if composed != id {
		t.Errorf("vector %s: fields compose to %d, not %d", v.name, composed, id)
	}
	if utc := d.UTC().Format("2006-01-02T15:04:05.000Z"); utc != v.get("utc") {
		t.Errorf("vector %s: utc %s, PROTOCOL.md says %s", v.name, utc, v.get("utc"))
	}
}

// checkServerVector: a server vector only describes the reference server; what can be checked
// without running one is that it names a known layout and a node id and core that fit it.
func checkServerVector(t *testing.T, v *vector) {
	f := fields(v.get("fields"))
	if f["layout"] != "snowflake" {
		t.Errorf("vector %s: layout %q is not one this test knows", v.name, f["layout"])
		return
	}
	l := SnowflakeLayout()
	workers := number(t, v, f["workers"])
	for uint64(1)<<l.CoreBits < workers {
		l.CoreBits++
	}
	if f["core_from"] == "node" {
		l.CoreFrom = CoreFromNode
	}
	node, core := number(t, v, f["node"]), number(t, v, f["core"])
	id := l.Compose(number(t, v, f["now_t"]), uint32(node), uint32(core), 0)
	if d := l.Decode(id); uint64(d.Node) != node || uint64(d.Core) != core || l.Validate() != nil {
		t.Errorf("vector %s: node %d core %d do not fit the layout (%+v)", v.name, node, core, d)
	}
}

// The worked examples of PROTOCOL.md "Anti-amplification, and how to ask for large batches".
func TestVectorsSizingRule(t *testing.T) {
	counted(t)
	for _, c := range []struct{ size, ranges int }{{20, 3}, {27, 5}, {403, 99}, {491, 121}, {1472, 121}} {
		if got := RangesMax(c.size); got != c.ranges {
			t.Errorf("RangesMax(%d) = %d, PROTOCOL.md says %d", c.size, got, c.ranges)
		}
	}
	for _, c := range []struct {
		count, perRange uint64
		ranges, size    int
	}{{20000, 4096, 6, 31}, {100000, 1024, 99, 403}, {1 << 20, 4096, 121, 491}, {1, 4096, 2, 20}} {
		if got := RangesForIDs(c.count, c.perRange); got != c.ranges {
			t.Errorf("RangesForIDs(%d, %d) = %d, want %d", c.count, c.perRange, got, c.ranges)
		}
		if got := RequestSizeForIDs(c.count, c.perRange); got != c.size {
			t.Errorf("RequestSizeForIDs(%d, %d) = %d, want %d", c.count, c.perRange, got, c.size)
		}
	}
	if fmt.Sprint(ResponseSizeMax(20), ResponseSizeMax(1000)) != "60 1472" {
		t.Errorf("ResponseSizeMax: %d %d", ResponseSizeMax(20), ResponseSizeMax(1000))
	}
}
