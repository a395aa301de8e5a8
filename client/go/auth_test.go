// auth_test.go — signing (PROTOCOL.md "Authentication"): SipHash-2-4 against the reference
// table of the SipHash paper, the key file reader's rules and messages (client/key_file.cc's),
// and a signed client against a fake server that checks its signatures: verified IDs, answers
// without or with a wrong MAC ignored and counted, an unsigned UNAUTHORIZED named once the
// attempts run out, a signed one ending the call, and every attempt signed anew. The signed
// vectors of PROTOCOL.md are checked in vectors_test.go.
package flurry

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SipHash-2-4 with key 00 01 .. 0f of the message 00 01 .. n-1: the reference implementation's
// vectors.h (vectors_sip64). Entries 0..16 and 63 as published; 31, 32 and 62 computed with
// tests/proto/make_vectors.py's independent implementation.
var siphashReference = map[int]string{
	0: "310e0edd47db6f72", 1: "fd67dc93c539f874", 2: "5a4fa9d909806c0d", 3: "2d7efbd796666785",
	4: "b7877127e09427cf", 5: "8da699cd64557618", 6: "cee3fe586e46c9cb", 7: "37d1018bf50002ab",
	8: "6224939a79f5f593", 9: "b0e4a90bdf82009e", 10: "f3b9dd94c5bb5d7a", 11: "a7ad6b22462fb3f4",
	12: "fbe50e86bc8f1e75", 13: "903d84c02756ea14", 14: "eef27a8e90ca23f7", 15: "e545be4961ca29a1",
	16: "db9bc2577fcc2a3f", 31: "42c341d8fa92d832", 32: "ce7cf2722f512771", 62: "575ff28e60381be5",
	63: "724506eb4c328a95",
}

func TestVectorsSipHash(t *testing.T) {
	counted(t)
	var key [SecretSize]byte
	message := make([]byte, 64)
	for i := range message {
		message[i] = byte(i)
		if i < SecretSize {
			key[i] = byte(i)
		}
	}
	for n, want := range siphashReference {
		if got := siphash24(&key, message[:n]); hex.EncodeToString(got[:]) != want {
			t.Errorf("SipHash-2-4 of %d bytes: % x, the reference says %s", n, got, want)
		}
	}
}

// testKey is the key of PROTOCOL.md's signed vectors and of the C++ tests: id 7, bytes 0..15.
func testKey() *Key {
	key := &Key{ID: 7}
	for i := range key.Secret {
		key.Secret[i] = byte(i)
	}
	return key
}

func writeKeyFile(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.key")
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // WriteFile's mode passes through the umask
		t.Fatal(err)
	}
	return path
}

const goodKeyFile = "# a client key\nname = \"billing\"\nid = 7\nsecret = \"000102030405060708090a0b0c0d0e0f\"  # hex\n"

func TestBehaviourKeyFileIsRead(t *testing.T) {
	counted(t)
	key, err := ReadKeyFile(writeKeyFile(t, goodKeyFile, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if key != *testKey() {
		t.Errorf("key %+v, want %+v", key, *testKey())
	}
	if key, err := ReadKeyFile(writeKeyFile(t, "id = 4294967295\r\nsecret = 'ffffffffffffffffffffffffffffffff'\r\n", 0o400)); err != nil ||
		key.ID != 4294967295 || key.Secret[15] != 0xff {
		t.Errorf("CRLF, literal string, largest id, mode 0400: %+v %v", key, err)
	}
}

func TestBehaviourKeyFileHashInAStringIsNotAComment(t *testing.T) {
	counted(t)
	for _, name := range []string{`"team #3"`, `'team #3'`, `"#"`, `"team #3" # a comment`} {
		text := "name = " + name + "\nid = 7 # seven\nsecret = \"000102030405060708090a0b0c0d0e0f\"#hex\n"
		if key, err := ReadKeyFile(writeKeyFile(t, text, 0o600)); err != nil || key != *testKey() {
			t.Errorf("name = %s: %v %v", name, key, err)
		}
	}
}

func TestBehaviourKeyFileErrorsNeverShowAValue(t *testing.T) {
	counted(t)
	const secret = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
	for _, c := range []struct{ text, mentions string }{
		{"id = 7\nsecret = " + secret + "\n", `line 2: secret's value is neither a whole number nor a one-line "string"`},
		{"id = 7\nsecret = " + secret[:16] + " " + secret[16:] + "\n", "line 2: expected key = value"},
		{"id = 7\nsecret = \"" + secret + "\n", "line 2: expected key = value"},
		{"id = 7\nsecret = \"" + secret + "\" " + secret + "\n", "line 2: expected key = value"},
		{"id = 7\nsecret = \"" + secret[:30] + "\"\n", `secret must be "32 hex digits"`},
	} {
		path := writeKeyFile(t, c.text, 0o600)
		_, err := ReadKeyFile(path)
		wantCode(t, err, ErrInvalidArgument, "key file "+path+": ", c.mentions)
		if err != nil && strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("the error shows the value: %v", err)
		}
	}
}

func TestBehaviourKeyFileIsRefused(t *testing.T) {
	counted(t)
	for _, c := range []struct {
		name, text string
		mode       os.FileMode
		mentions   string
	}{
		{"readable by others", goodKeyFile, 0o644, "may be read by group or others; run chmod 600 "},
		{"readable by group", goodKeyFile, 0o640, "chmod 600"},
		{"short secret", "id = 7\nsecret = \"0001\"\n", 0o600, `secret must be "32 hex digits" (16 bytes)`},
		{"secret not hex", "id = 7\nsecret = \"000102030405060708090a0b0c0d0e0g\"\n", 0o600, "secret must be"},
		{"secret a number", "id = 7\nsecret = 1234\n", 0o600, "secret must be"},
		{"unknown key", goodKeyFile + "secrte = 1\n", 0o600, "line 5: unknown key 'secrte' (expected id, secret, name)"},
		{"not TOML", "id = 7\nsecret = 000102\n", 0o600, "line 2: "},
		{"no equals", "id = 7\nsecret\n", 0o600, "line 2: expected key = value"},
		{"unterminated string", "id = 7\nsecret = \"0001\n", 0o600, "line 2: "},
		{"table", "[key]\nid = 7\n", 0o600, "line 1: "},
		{"twice", goodKeyFile + "id = 8\n", 0o600, "line 5: id is given twice"},
		{"no id", "secret = \"000102030405060708090a0b0c0d0e0f\"\n", 0o600, `needs id = N and secret = "32 hex digits"`},
		{"no secret", "id = 7\n", 0o600, "needs id = N"},
		{"id zero", "id = 0\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", 0o600, "id must be a whole number in 1..4294967295"},
		{"id too large", "id = 4294967296\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", 0o600, "id must be"},
		{"id a string", "id = \"7\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", 0o600, "id must be"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeKeyFile(t, c.text, c.mode)
			_, err := ReadKeyFile(path)
			wantCode(t, err, ErrInvalidArgument, "key file "+path+": ", c.mentions)
		})
	}
	_, err := ReadKeyFile(filepath.Join(t.TempDir(), "absent.key"))
	wantCode(t, err, ErrInvalidArgument, "absent.key: no such file or directory")
	_, err = ReadKeyFile(t.TempDir())
	wantCode(t, err, ErrInvalidArgument, "not a regular file")
}

func TestBehaviourKeyPrintsNoSecret(t *testing.T) {
	counted(t)
	key := Key{ID: 7}
	for i := range key.Secret {
		key.Secret[i] = byte(0xa0 + i) // no byte in common with the id or the text around it
	}
	secretHex := hex.EncodeToString(key.Secret[:])
	forbidden := []string{
		secretHex, strings.ToUpper(secretHex), string(key.Secret[:]), fmt.Sprint(key.Secret[:2]),
		fmt.Sprintf("%d %d", key.Secret[0], key.Secret[1]), fmt.Sprintf("%#x", key.Secret[0]),
		hex.EncodeToString(key.Secret[:2]), strings.ToUpper(hex.EncodeToString(key.Secret[:2])),
		fmt.Sprintf("%q", key.Secret[:2]),
	}
	opts := DefaultOptions()
	opts.Key = &key
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q"} {
		for _, value := range []any{key, &key, opts, &opts, []Key{key}} {
			out := fmt.Sprintf(verb, value)
			for _, secret := range forbidden {
				if strings.Contains(out, secret) {
					t.Errorf("fmt %s of a %T shows the secret (%q): %s", verb, value, secret, out)
				}
			}
		}
	}
	if got := fmt.Sprintf("%v|%+v|%s", key, &key, key); got != "Key(id=7)|Key(id=7)|Key(id=7)" {
		t.Errorf("a key prints as %q, want its id", got)
	}
	if got := fmt.Sprintf("%#v", key); got != "flurry.Key{ID: 7 /* Secret hidden */}" {
		t.Errorf("%%#v of a key is %q", got)
	}
	var none *Key
	if got := fmt.Sprint(none); got != "<nil>" {
		t.Errorf("a nil *Key prints as %q", got)
	}
}

// signedClient is a client of server signing with key: answerTimeout per attempt (an answer,
// verified or not, always comes within it: the exact counters hold), 2 attempts.
func signedClient(t *testing.T, key *Key, prefetch int, servers ...string) *Client {
	t.Helper()
	opts := DefaultOptions()
	opts.Servers = servers
	opts.Timeout = answerTimeout
	opts.Attempts = 2
	opts.Prefetch = prefetch
	opts.Key = key
	return clientWith(t, opts, nil)
}

// signedServer answers every request as a server with testKey: GET_IDS from ids, GET_SEQ of any
// name 1, 2, ..., PING and INFO; every answer signed.
func signedServer(t *testing.T, ids *idSource) *fakeServer {
	var mu sync.Mutex
	var seqNext uint64 = 1
	return startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		var answer []byte
		switch Opcode(r.opcode) {
		case OpGetIDs:
			answer = ids.answer(r)
		case OpGetSeq:
			mu.Lock()
			answer = okRanges(r, Range{First: seqNext, Count: r.count})
			seqNext += uint64(r.count)
			mu.Unlock()
		case OpInfo:
			info := Info{EpochMs: 1704067200000, TimeUnitMs: 1, TimeBits: 41, NodeBits: 10, SequenceBits: 12}
			answer = encodeResponse(answerTo(r, StatusOK, 0), nil, &info)
		default:
			answer = statusAnswer(r, StatusOK, 0)
		}
		return [][]byte{signAnswer(answer, r, testKey())}
	})
}

func TestBehaviourSignedRequestsGetVerifiedAnswers(t *testing.T) {
	counted(t)
	server := signedServer(t, newIDSource(1000, 4096))
	client := signedClient(t, testKey(), 0, server.addr)
	ids, err := client.Get(5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 5000 || ids[0] != 1000 || ids[4999] != 5999 {
		t.Errorf("IDs %d..%d (%d), want 1000..5999", ids[0], ids[len(ids)-1], len(ids))
	}
	if _, err := client.Ping(); err != nil {
		t.Fatal(err)
	}
	if info, err := client.Info(); err != nil || info.TimeBits != 41 {
		t.Fatalf("info %+v, %v", info, err)
	}
	if seq, err := client.GetSeq("invoices", 3); err != nil || len(seq) != 3 || seq[0] != 1 {
		t.Fatalf("GetSeq: %v, %v", seq, err)
	}
	// The first GET_IDS, signed for any server, was refused wrong_server naming node 5 and
	// signed again for it at once: one request more, no attempt used; every later one names 5.
	checkCounters(t, client, Counters{Requests: 6, Responses: 6, IDsReceived: 5003})
	if n := server.wrongServerAnswers(); n != 1 {
		t.Errorf("%d wrong_server answers, want 1 (the first request only)", n)
	}
	// Each request is the unsigned size + 3, at least 44, and room for GET_SEQ's name before
	// the trailer (the server checked every trailer).
	requests := server.received()
	want := []int{RequestSizeForIDs(4096, 256) + 3, SignedRequestSizeMin /* 27 + 3 */, SignedRequestSizeMin,
		SignedRequestSizeMin, RequestHeaderSize + 1 + len("invoices") + AuthTrailerSize}
	if len(requests) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(requests), len(want), requests)
	}
	for i, r := range requests {
		if r.keyID != 7 || r.size != want[i] || r.server != fakeNode {
			t.Errorf("request %d: %+v, want key 7, %d bytes, for node %d", i, r, want[i], fakeNode)
		}
	}
	// The prefetch refills sign too.
	prefetching := signedClient(t, testKey(), 64, server.addr)
	for i := 0; i < 100; i++ {
		if _, err := prefetching.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if c := prefetching.Counters(); c.IDsReceived < 100 || c.UnverifiedResponses != 0 {
		t.Errorf("prefetch counters %+v", c)
	}
}

func TestBehaviourSignedAnswersWithoutOrWithBadMacAreIgnored(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	// Each forgery answers with IDs from its own thousand (forgery i: 1000*(i+1)...), so an ID
	// the client took names the forgery it accepted.
	idsOf := func(r request, i int) []byte {
		return okRanges(r, Range{First: uint64(1000 * (i + 1)), Count: r.count})
	}
	forgeries := []struct {
		name   string
		answer func(r request, i int) []byte
	}{
		{"no MAC", idsOf},
		{"MAC of another request", func(r request, i int) []byte {
			other := r
			other.mac[3] ^= 0x10
			return signAnswer(idsOf(r, i), other, testKey())
		}},
		{"a flipped MAC byte", func(r request, i int) []byte {
			signed := signAnswer(idsOf(r, i), r, testKey())
			signed[len(signed)-1] ^= 0x01
			return signed
		}},
		{"a flipped answer byte", func(r request, i int) []byte {
			signed := signAnswer(idsOf(r, i), r, testKey())
			signed[ResponseHeaderSize] ^= 0x01
			return signed
		}},
		{"shorter than 28 bytes", func(r request, i int) []byte { return signAnswer(idsOf(r, i), r, testKey())[:27] }},
	}
	// Every request gets all the forgeries and nothing else: the call waits out its two attempts
	// once (not once per forgery), and every forgery is counted at each attempt.
	forger := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		var out [][]byte
		for i, f := range forgeries {
			out = append(out, f.answer(r, i))
		}
		return out
	})
	deceived := signedClient(t, testKey(), 0, forger.addr)
	id, err := deceived.Next()
	if err == nil {
		if i := int(id/1000) - 1; i >= 0 && i < len(forgeries) {
			t.Fatalf("ID %d accepted: an answer with %s", id, forgeries[i].name)
		}
		t.Fatalf("ID %d accepted", id)
	}
	wantCode(t, err, ErrNoAnswer, "no answer from "+forger.addr+" after 2 attempts",
		"a server drops signed requests whose key id it does not know or whose MAC does not verify")
	// The first request was refused wrong_server (verified, and signed again at once).
	checkCounters(t, deceived, Counters{Requests: 3, Responses: 1, Timeouts: 2, UnverifiedResponses: 2 * uint64(len(forgeries))})

	// A forged answer first, then the real one: the forged one is counted, the real one used.
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		return [][]byte{okRanges(r, Range{First: 666, Count: 1}), signAnswer(ids.answer(r), r, testKey())}
	})
	client := signedClient(t, testKey(), 0, server.addr)
	if id, err := client.Next(); err != nil || id == 666 {
		t.Fatalf("id %d, %v", id, err)
	}
	checkCounters(t, client, Counters{Requests: 2, Responses: 2, IDsReceived: 1, UnverifiedResponses: 1})
}

func TestBehaviourSignedUnsignedUnauthorizedIsNamedAfterTheAttempts(t *testing.T) {
	counted(t)
	var quiet atomic.Bool
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		if quiet.Load() {
			return nil
		}
		return [][]byte{statusAnswer(r, StatusUnauthorized, 34)} // unknown_key: no MAC
	})
	client := signedClient(t, testKey(), 0, server.addr)
	_, err := client.Get(10)
	wantCode(t, err, ErrUnauthorized, "flurry: no verifiable answer after 2 attempts; an unsigned UNAUTHORIZED "+
		"(unknown_key) came back, which a signed client cannot trust: check the key id, secret and clock")
	checkCounters(t, client, Counters{Requests: 3, Responses: 1, Timeouts: 2, UnverifiedResponses: 2})
	// The next call starts clean: silence is no answer, not the refusal of the call before.
	quiet.Store(true)
	_, err = client.Get(10)
	wantCode(t, err, ErrNoAnswer, "no answer from")
}

func TestBehaviourSignedUnauthorizedEndsTheCall(t *testing.T) {
	counted(t)
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		return [][]byte{signAnswer(statusAnswer(r, StatusUnauthorized, 39), r, testKey())} // not_permitted
	})
	client := signedClient(t, testKey(), 0, server.addr)
	_, err := client.Get(10)
	wantCode(t, err, ErrUnauthorized, server.addr+" answered UNAUTHORIZED (not_permitted) to GET_IDS: "+
		"the key is not allowed this request (see flurryctl keys list)")
	checkCounters(t, client, Counters{Requests: 2, Responses: 2})
}

// Every attempt, and every re-ask after a signed RETRY (rate_limited), is signed anew: a new
// timestamp from the wall clock, so a new MAC (the server drops a MAC it has seen: a replay).
func TestBehaviourSignedEachAttemptIsSignedAnew(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		switch len(before) {
		case 0:
			return nil // a timeout: the second attempt goes to the same (only) server
		case 1:
			return [][]byte{signAnswer(statusAnswer(r, StatusRetry, 2000), r, testKey())}
		}
		return [][]byte{signAnswer(ids.answer(r), r, testKey())}
	})
	var waits []time.Duration
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts, opts.Key = []string{server.addr}, answerTimeout, 2, testKey()
	client := clientWith(t, opts, &waits)
	start := uint64(time.Now().UnixMicro())
	if _, err := client.Next(); err != nil {
		t.Fatal(err)
	}
	end := uint64(time.Now().UnixMicro())
	checkCounters(t, client, Counters{Requests: 4, Responses: 3, Retries: 1, Timeouts: 1, IDsReceived: 1})
	requests := server.received()
	if len(requests) != 3 {
		t.Fatalf("%d requests, want 3", len(requests))
	}
	for i, r := range requests {
		if r.timestampUs < start || r.timestampUs > end {
			t.Errorf("request %d: timestamp %d is not the wall clock's (%d..%d)", i, r.timestampUs, start, end)
		}
		if i == 0 {
			continue
		}
		before := requests[i-1]
		if r.timestampUs <= before.timestampUs || r.mac == before.mac {
			t.Errorf("request %d is not signed anew: timestamp %d after %d, MAC % x after % x",
				i, r.timestampUs, before.timestampUs, r.mac, before.mac)
		}
	}
	// The attempt after the timeout waited it out: its timestamp is at least that much later. A
	// lower bound (a read deadline never passes early; a slow machine only adds), less a tenth
	// for the wall clock the timestamps come from being slewed while the deadline's clock is not.
	if gap := time.Duration(requests[1].timestampUs-requests[0].timestampUs) * time.Microsecond; gap < answerTimeout*9/10 {
		t.Errorf("second attempt stamped %v after the first, not after its %v timeout", gap, answerTimeout)
	}
	if len(waits) != 1 || waits[0] != 2*time.Millisecond {
		t.Errorf("waits %v: the signed RETRY's hint, once", waits)
	}
}
