// forms_test.go — the ID forms against client/forms-vectors.json, the one table every client
// checks itself against (read at run time: FLURRY_FORMS_VECTORS, set by meson; else
// ../forms-vectors.json): each ID formats to each text byte for byte, each text parses back to
// the ID (readable: and its tag), each `also_reads` text parses to its ID, each `refused` text
// fails. Then what the table does not say: the uuid form is an RFC 9562 version-7 UUID (Go's
// standard library has no UUID type, so the bits are read here), the opaque form's known
// answers and inverse, and the key file reader's subset of TOML and mode check.
package flurry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type formsTable struct {
	Key struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	} `json:"key"`
	Tag     string `json:"tag"`
	Layouts []struct {
		Name   string `json:"name"`
		Layout struct {
			TimeBits     uint   `json:"time_bits"`
			NodeBits     uint   `json:"node_bits"`
			SequenceBits uint   `json:"sequence_bits"`
			TimeUnitMs   uint64 `json:"time_unit_ms"`
			EpochMs      string `json:"epoch_ms"`
		} `json:"layout"`
		IDs     []map[string]string `json:"ids"`
		Refused map[string][]string `json:"refused"`
	} `json:"layouts"`
	AlsoReads []struct {
		Form string `json:"form"`
		Text string `json:"text"`
		ID   string `json:"id"`
	} `json:"also_reads"`
	Refused map[string][]string `json:"refused"`
}

func formsVectorsPath() string {
	if path := os.Getenv("FLURRY_FORMS_VECTORS"); path != "" {
		return path
	}
	return "../forms-vectors.json"
}

func readFormsTable(t *testing.T) *formsTable {
	t.Helper()
	data, err := os.ReadFile(formsVectorsPath())
	if err != nil {
		t.Fatalf("cannot read the forms vectors (set FLURRY_FORMS_VECTORS): %v", err)
	}
	var table formsTable
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatalf("%s: %v", formsVectorsPath(), err)
	}
	return &table
}

func decimal(t *testing.T, text string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a decimal number: %v", text, err)
	}
	return n
}

// vectorsKeyRing is the table's key as a key file would give it.
func vectorsKeyRing(t *testing.T, table *formsTable) *OpaqueKeyRing {
	t.Helper()
	ring, err := ParseOpaqueKeyRing("[[key]]\nid = \""+table.Key.ID+"\"\nsecret = \""+table.Key.Secret+"\"\n", "the vectors' key")
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func TestFormsVectors(t *testing.T) {
	counted(t)
	table := readFormsTable(t)
	keys := vectorsKeyRing(t, table)
	checked := 0
	for _, entry := range table.Layouts {
		l := Layout{TimeBits: entry.Layout.TimeBits, NodeBits: entry.Layout.NodeBits, SequenceBits: entry.Layout.SequenceBits,
			TimeUnitMs: entry.Layout.TimeUnitMs, EpochMs: decimal(t, entry.Layout.EpochMs)}
		readable, err := NewReadableForm(l)
		if err != nil {
			t.Fatalf("%s: %v", entry.Name, err)
		}
		opts := FormOptions{Layout: &l, Keys: keys}
		for _, one := range entry.IDs {
			id := decimal(t, one["id"])
			for _, form := range Forms {
				want := one[form.String()]
				got, err := FormatAs(form, id, opts)
				if err != nil || got != want {
					t.Errorf("%s: %v of %d is %q (%v), the table says %q", entry.Name, form, id, got, err, want)
				}
				parsed, err := ParseAs(form, want, opts)
				if err != nil || parsed.ID != id || parsed.Form != form || parsed.Tag != "" {
					t.Errorf("%s: %v %q reads as %+v (%v), want %d", entry.Name, form, want, parsed, err, id)
				}
				checked++
			}
			tagged := one["readable_tagged"]
			if got, err := readable.Format(id, table.Tag); err != nil || got != tagged {
				t.Errorf("%s: readable of %d with tag %s is %q (%v), the table says %q", entry.Name, id, table.Tag, got, err, tagged)
			}
			withTag := opts
			withTag.Tag = table.Tag
			if got, err := FormatAs(FormReadable, id, withTag); err != nil || got != tagged {
				t.Errorf("%s: FormatAs readable with tag: %q (%v)", entry.Name, got, err)
			}
			if got, tag, err := readable.Parse(tagged); err != nil || got != id || tag != table.Tag {
				t.Errorf("%s: %q reads as %d tag %q (%v), want %d tag %s", entry.Name, tagged, got, tag, err, id, table.Tag)
			}
			checked++
		}
		for form, texts := range entry.Refused {
			f, err := ParseForm(form)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range texts {
				if parsed, err := ParseAs(f, text, opts); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%s: %s %q is read as %+v (%v); the table says it must be refused", entry.Name, form, text, parsed, err)
				}
				checked++
			}
		}
	}
	snowflake := SnowflakeLayout()
	opts := FormOptions{Layout: &snowflake, Keys: keys}
	for _, also := range table.AlsoReads {
		form, err := ParseForm(also.Form)
		if err != nil {
			t.Fatal(err)
		}
		if parsed, err := ParseAs(form, also.Text, opts); err != nil || parsed.ID != decimal(t, also.ID) {
			t.Errorf("%s %q reads as %+v (%v), the table says %s", also.Form, also.Text, parsed, err, also.ID)
		}
		checked++
	}
	for form, texts := range table.Refused {
		f, err := ParseForm(form)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			if parsed, err := ParseAs(f, text, opts); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s %q is read as %+v (%v); the table says it must be refused", form, text, parsed, err)
			}
			checked++
		}
	}
	t.Logf("%d texts of %s checked (%d layouts)", checked, formsVectorsPath(), len(table.Layouts))
	if len(table.Layouts) == 0 || checked < 400 {
		t.Errorf("only %d texts checked: is %s the table?", checked, formsVectorsPath())
	}
}

// Every uuid text of the table is an RFC 9562 UUID: version 7 (the 13th hex digit), variant
// 10 in binary (the 17th hex digit is 8, 9, a or b), its first 48 bits the ID's instant in
// Unix milliseconds. Go's standard library has no UUID type to ask; the bits are read here.
func TestFormsUUIDIsVersion7WithTheRFC9562Variant(t *testing.T) {
	counted(t)
	table := readFormsTable(t)
	for _, entry := range table.Layouts {
		l := Layout{TimeBits: entry.Layout.TimeBits, NodeBits: entry.Layout.NodeBits, SequenceBits: entry.Layout.SequenceBits,
			TimeUnitMs: entry.Layout.TimeUnitMs, EpochMs: decimal(t, entry.Layout.EpochMs)}
		for _, one := range entry.IDs {
			text := one["uuid"]
			digits := strings.ReplaceAll(text, "-", "")
			if len(digits) != 32 || strings.ToLower(text) != text {
				t.Fatalf("%q is not 32 lower-case hex digits in 8-4-4-4-12", text)
			}
			if digits[12] != '7' || !strings.ContainsRune("89ab", rune(digits[16])) {
				t.Errorf("%s: %q is not version 7 with the RFC 9562 variant", entry.Name, text)
			}
			ms, err := strconv.ParseUint(digits[:12], 16, 64)
			if want := l.Decode(decimal(t, one["id"])).UnixMs; err != nil || ms != want {
				t.Errorf("%s: %q carries %d ms, the ID is of %d", entry.Name, text, ms, want)
			}
		}
	}
}

// The known answers of README "ID forms" (key 000102...0f, id k1), Decrypt undoing Encrypt,
// and consecutive IDs coming out unrelated (about half of the 63 bits differ).
func TestFormsOpaqueKnownAnswersAndInverse(t *testing.T) {
	counted(t)
	var secret [SecretSize]byte
	for i := range secret {
		secret[i] = byte(i)
	}
	key, err := NewOpaqueKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	for x, want := range map[uint64]uint64{0: 7704551156889774887, 1: 7614573489595586949, 4194324487: 3263842716310771651} {
		if got := key.Encrypt(x); got != want {
			t.Errorf("Encrypt(%d) = %d, the known answer is %d", x, got, want)
		}
	}
	if text, err := key.FormatID(4194324487); err != nil || text != "k1_2TJVZN1P765Y3" {
		t.Errorf("FormatID: %q %v", text, err)
	}
	random := rand.New(rand.NewSource(28))
	differing := 0
	const n = 2000
	for i := 0; i < n; i++ {
		x := random.Uint64() >> 1
		if got := key.Decrypt(key.Encrypt(x)); got != x {
			t.Fatalf("Decrypt(Encrypt(%d)) = %d", x, got)
		}
		if y := key.Encrypt(x); y > IDMax {
			t.Fatalf("Encrypt(%d) = %d, not below 2^63", x, y)
		}
		differing += bits.OnesCount64(key.Encrypt(uint64(i)) ^ key.Encrypt(uint64(i+1)))
	}
	if mean := float64(differing) / n; mean < 29 || mean > 34 {
		t.Errorf("consecutive IDs differ in %.1f bits on average, want about 31.5", mean)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
		if text := fmt.Sprintf(verb, key); text != "OpaqueKey(k1)" {
			t.Errorf("an opaque key prints with %s as %q", verb, text)
		}
	}
	if _, err := NewOpaqueKey("k1", [SecretSize]byte{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an all-zero secret: %v", err)
	}
	for _, id := range []string{"", "K1", "k_1", "123456789"} {
		if _, err := NewOpaqueKey(id, secret); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("key id %q: %v", id, err)
		}
	}
}

// ParseAny finds the one form that reads a text, and refuses a text two forms read.
func TestFormsParseAny(t *testing.T) {
	counted(t)
	snowflake := SnowflakeLayout()
	keys, err := ParseOpaqueKeyRing("[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", "test")
	if err != nil {
		t.Fatal(err)
	}
	opts := FormOptions{Layout: &snowflake, Keys: keys}
	for text, want := range map[string]Parsed{
		"4194324487":                           {Form: FormDec, ID: 4194324487},
		"0x00000000fa005007":                   {Form: FormHex, ID: 4194324487},
		"0000003X00M07":                        {Form: FormBase32, ID: 4194324487},
		"k1_2TJVZN1P765Y3":                     {Form: FormOpaque, ID: 4194324487, KeyID: "k1"},
		"240101000001000ORD0020487":            {Form: FormReadable, ID: snowflake.Compose(1000, 5, 0, 7), Tag: "ORD"},
		"018cc251-f7e8-7000-8000-0000fa005007": {Form: FormUUID, ID: snowflake.Compose(1000, 5, 0, 7)},
	} {
		if got, err := ParseAny(text, opts); err != nil || got != want {
			t.Errorf("ParseAny(%q) = %+v (%v), want %+v", text, got, err, want)
		}
	}
	_, err = ParseAny("1234567890123", opts) // 13 digits: dec and base32
	wantCode(t, err, ErrInvalidArgument, "reads as dec (1234567890123) and as base32", "say which form it is")
	_, err = ParseAny("0xZZ", opts)
	wantCode(t, err, ErrInvalidArgument, "is not a hexadecimal ID")
	_, err = ParseAs(FormOpaque, "k1_2TJVZN1P765Y3", FormOptions{})
	wantCode(t, err, ErrInvalidArgument, "the opaque form needs a key file")
	_, err = FormatAs(FormDec, 1, FormOptions{Tag: "ORD"})
	wantCode(t, err, ErrInvalidArgument, "a tag is part of the readable form only")
	if _, err := ParseForm("octal"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ParseForm(octal): %v", err)
	}
}

func writeFile(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.toml")
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // WriteFile's mode passes through the umask
		t.Fatal(err)
	}
	return path
}

// The key file of README "ID forms", the C++ reader's rules, and the TOML this reader refuses.
func TestFormsKeyFile(t *testing.T) {
	counted(t)
	const readme = `current = "k2"          # encodes new IDs; may be left out when there is one key

[[key]]
id = "k1"               # 1..8 chars of a-z, 0-9
secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes: head -c 16 /dev/urandom | xxd -p

[[key]]
id = "k2"
secret = "8f3c1d6e2a9b4c7d0e1f2a3b4c5d6e7f"
`
	ring, err := ReadOpaqueKeyRing(writeFile(t, readme, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if ring.Len() != 2 || ring.Current().ID() != "k2" || ring.Find("K1") == nil {
		t.Fatalf("ring of %d keys, current %v", ring.Len(), ring.Current())
	}
	k1, _ := ring.Find("k1").FormatID(4194324487)
	if id, err := ring.Decode(k1); err != nil || id != 4194324487 || k1 != "k1_2TJVZN1P765Y3" {
		t.Errorf("a k1 string %q decodes to %d (%v)", k1, id, err)
	}
	k2, _ := ring.Current().FormatID(4194324487)
	if id, err := ring.Decode(k2); err != nil || id != 4194324487 || !strings.HasPrefix(k2, "k2_") {
		t.Errorf("the current key's %q decodes to %d (%v)", k2, id, err)
	}
	if ring, err := ReadOpaqueKeyRing(writeFile(t, "[[ key ]]\r\nid = 'k1'\r\nsecret = '000102030405060708090a0b0c0d0e0f'\r\n", 0o400)); err != nil ||
		ring.Current().ID() != "k1" {
		t.Errorf("CRLF, literal strings, one key without current, mode 0400: %v", err)
	}
	const secret = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
	one := "[[key]]\nid = \"k1\"\nsecret = \"" + secret + "\"\n"
	for _, c := range []struct {
		name, text, mentions string
	}{
		{"no key", "current = \"k1\"\n", "no key"},
		{"a table", "[key]\nid = \"k1\"\n", "line 1: the only table this file may have is [[key]]"},
		{"another table", one + "[[keys]]\n", "line 4: the only table"},
		{"a number", "[[key]]\nid = 1\n", "line 2: id must be a one-line \"string\" without escapes"},
		{"an escape", "[[key]]\nid = \"k\\u0031\"\n", "line 2: id must be"},
		{"a multi-line string", "[[key]]\nid = \"\"\"k1\"\"\"\n", "line 2: id must be"},
		{"a secret unquoted", "[[key]]\nid = \"k1\"\nsecret = " + secret + "\n", "line 3: secret must be"},
		{"an unterminated string", "[[key]]\nid = \"k1\"\nsecret = \"" + secret + "\n", "line 3: secret must be"},
		{"a dotted name", "[[key]]\nkey.id = \"k1\"\n", "line 2: expected name = \"string\" or [[key]]"},
		{"a quoted name", "[[key]]\n\"id\" = \"k1\"\n", "line 2: expected"},
		{"an inline table", "key = { id = \"k1\" }\n", "line 1: key must be"},
		{"an array", "current = [\"k1\"]\n", "line 1: current must be"},
		{"an unknown setting", "colour = \"red\"\n" + one, "line 1: unknown setting 'colour' (current and [[key]])"},
		{"current after the keys", one + "current = \"k1\"\n", "line 4: key 1 has an unknown setting 'current' (only id and secret)"},
		{"a key's unknown setting", one + "name = \"billing\"\n", "key 1 has an unknown setting 'name'"},
		{"twice", one + "id = \"k2\"\n", "line 4: id is given twice"},
		{"no secret", "[[key]]\nid = \"k1\"\n", "key 1 needs both id = \"...\" and secret = \"...\""},
		{"a short secret", "[[key]]\nid = \"k1\"\nsecret = \"0001\"\n", "key 1 (k1): secret must be 32 hex digits (16 bytes)"},
		{"a secret not hex", "[[key]]\nid = \"k1\"\nsecret = \"" + secret[:31] + "g\"\n", "secret must be 32 hex digits"},
		{"an all-zero secret", "[[key]]\nid = \"k1\"\nsecret = \"" + strings.Repeat("0", 32) + "\"\n", "the secret is all zero"},
		{"a bad id", "[[key]]\nid = \"K1\"\nsecret = \"" + secret + "\"\n", "key 1: key id 'K1' must be 1 to 8 chars of a-z and 0-9"},
		{"an id twice", one + strings.Replace(one, secret, secret[:31]+"0", 1), "key id 'k1' appears twice"},
		{"several keys, no current", one + strings.Replace(one, "k1", "k2", 1), "2 keys and no current = \"ID\""},
		{"current names no key", "current = \"k9\"\n" + one, "current = 'k9' names no key"},
		{"a byte order mark", "\ufeff" + one, "line 1: a byte order mark"},
		{"too many keys", strings.Repeat(one, 65), "more than 64 keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.text, 0o600)
			_, err := ReadOpaqueKeyRing(path)
			wantCode(t, err, ErrInvalidArgument, path+": ", c.mentions)
			if err != nil && strings.Contains(err.Error(), secret[:8]) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602} {
		path := writeFile(t, one, mode)
		_, err := ReadOpaqueKeyRing(path)
		wantCode(t, err, ErrInvalidArgument, "group or others may read or write it", "(chmod 600 "+path+")")
	}
	_, err = ReadOpaqueKeyRing(filepath.Join(t.TempDir(), "absent.toml"))
	wantCode(t, err, ErrInvalidArgument, "absent.toml: no such file or directory")
	_, err = ReadOpaqueKeyRing(t.TempDir())
	wantCode(t, err, ErrInvalidArgument, "is not a regular file")
	_, err = ReadOpaqueKeyRing(writeFile(t, one+strings.Repeat("#", opaqueKeyFileSizeMax), 0o600))
	wantCode(t, err, ErrInvalidArgument, "is larger than 65536 bytes")
}

// Random IDs of each table layout come back from every form; random texts (ID-like alphabets,
// all lengths up to 40) never make a parser panic, and what a parser reads formats (readable,
// uuid: back to the text, up to case).
func TestFormsRoundTripAndRandomTexts(t *testing.T) {
	counted(t)
	table := readFormsTable(t)
	keys := vectorsKeyRing(t, table)
	random := rand.New(rand.NewSource(1128))
	const alphabet = "0123456789abcdefxXyzABCDEFILOUZ_-k"
	for _, entry := range table.Layouts {
		l := Layout{TimeBits: entry.Layout.TimeBits, NodeBits: entry.Layout.NodeBits, SequenceBits: entry.Layout.SequenceBits,
			TimeUnitMs: entry.Layout.TimeUnitMs, EpochMs: decimal(t, entry.Layout.EpochMs)}
		opts := FormOptions{Layout: &l, Keys: keys}
		for i := 0; i < 300; i++ {
			id := random.Uint64() >> (64 - (l.TimeBits + l.NodeBits + l.SequenceBits))
			for _, form := range Forms {
				text, err := FormatAs(form, id, opts)
				if err != nil {
					t.Fatalf("%s: %v of %d: %v", entry.Name, form, id, err)
				}
				if parsed, err := ParseAs(form, text, opts); err != nil || parsed.ID != id {
					t.Fatalf("%s: %v %q reads as %+v (%v), want %d", entry.Name, form, text, parsed, err, id)
				}
			}
		}
		for i := 0; i < 3000; i++ {
			text := make([]byte, random.Intn(41))
			for j := range text {
				text[j] = alphabet[random.Intn(len(alphabet))]
			}
			for _, form := range Forms {
				parsed, err := ParseAs(form, string(text), opts)
				if err != nil {
					continue
				}
				back, err := FormatAs(form, parsed.ID, FormOptions{Layout: &l, Keys: keys, Tag: parsed.Tag})
				if form == FormOpaque {
					back, err = keys.Find(parsed.KeyID).FormatID(parsed.ID)
				}
				// Fixed-width forms without aliases spell an ID one way (up to case); dec takes
				// leading zeros, hex short forms, base32 and opaque aliases.
				canonical := form == FormReadable || form == FormUUID
				if err != nil || canonical && !strings.EqualFold(back, string(text)) {
					t.Errorf("%s: %v %q reads as %d, which formats as %q (%v)", entry.Name, form, text, parsed.ID, back, err)
				}
			}
		}
	}
}
