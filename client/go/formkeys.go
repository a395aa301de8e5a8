// formkeys.go — the key file of the opaque form (the C++ client's client/form_keys.h), read
// without a TOML library (the package depends on the standard library only):
//
//	current = "k2"        # the key that encodes new IDs; may be left out when there is one key
//	[[key]]
//	id = "k1"             # 1..8 chars of a-z and 0-9; the opaque string starts with it
//	secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
//	[[key]]
//	id = "k2"
//	secret = "..."
//
// Every key decodes (an opaque string names its key id), only `current` encodes: to rotate,
// add a key and point `current` at it; drop the old key once no stored ID uses it.
//
// Contract: the reader takes the small part of TOML such a file needs and refuses everything
// else naming the line: blank lines and # comments; `name = "string"` or `name = 'string'`
// lines (a bare name; a one-line string without escapes; an optional comment after it);
// `[[key]]` headers. `current` must come before the first [[key]] (after it, it would be a
// setting of that key, which has only id and secret: refused, as the C++ reader refuses it).
// A number, an escape, a multi-line string, a [table], a dotted or quoted name, a name given
// twice in one table: refused. Then the checks of the C++ reader: every key has an id and a
// secret of 32 hex digits, ids unique (ignoring case), at most opaqueKeyCountMax keys, a
// `current` naming one of them (required with several keys). ReadOpaqueKeyRing also refuses a
// file that is not regular, that group or others may read or write (mode 0600 or stricter),
// or larger than 64 KiB. Errors name the file (or source) and the line or key at fault, never
// a secret. An OpaqueKeyRing is immutable: safe for many goroutines.

package flurry

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

const (
	opaqueKeyFileSizeMax = 64 * 1024
	opaqueKeyCountMax    = 64
)

// OpaqueKeyRing is the keys of an opaque-form key file: Current encodes, every one decodes.
type OpaqueKeyRing struct {
	keys    []*OpaqueKey
	current int
}

// Current is the key new IDs are encoded with.
func (r *OpaqueKeyRing) Current() *OpaqueKey { return r.keys[r.current] }

// Find is the key with this id (ignoring case), or nil.
func (r *OpaqueKeyRing) Find(id string) *OpaqueKey {
	for _, key := range r.keys {
		if key.hasID(id) {
			return key
		}
	}
	return nil
}

// Len is the number of keys.
func (r *OpaqueKeyRing) Len() int { return len(r.keys) }

// Decode reads an opaque string with the key it names. Errors: it is malformed, or names a
// key the ring lacks.
func (r *OpaqueKeyRing) Decode(text string) (uint64, error) {
	id, err := OpaqueKeyID(text)
	if err != nil {
		return 0, err
	}
	key := r.Find(id)
	if key == nil {
		return 0, formError("opaque ID %s names key '%s', which the key file lacks", quoted(text), id)
	}
	return key.ParseID(text)
}

// ReadOpaqueKeyRing reads an opaque-form key file (the file `flurry --form-key-file` reads).
// Errors: ErrInvalidArgument naming the file: it cannot be read, is not a regular file, may be
// read or written by group or others (with the chmod that fixes it), is larger than 64 KiB, or
// what ParseOpaqueKeyRing refuses.
func ReadOpaqueKeyRing(path string) (*OpaqueKeyRing, error) {
	file, err := os.Open(path)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return nil, formError("key file %s: %v", path, err)
	}
	defer file.Close()
	info, err := file.Stat() // of the file opened: it cannot be swapped between the check and the read
	switch {
	case err != nil:
		return nil, formError("key file %s: %v", path, err)
	case !info.Mode().IsRegular():
		return nil, formError("key file %s is not a regular file", path)
	case info.Mode().Perm()&0o077 != 0:
		return nil, formError("key file %s has mode %04o: group or others may read or write it; a key file must be "+
			"mode 0600 or stricter (chmod 600 %s)", path, info.Mode().Perm(), path)
	case info.Size() > opaqueKeyFileSizeMax:
		return nil, formError("key file %s is larger than %d bytes", path, opaqueKeyFileSizeMax)
	}
	data, err := io.ReadAll(io.LimitReader(file, opaqueKeyFileSizeMax+1))
	if err != nil {
		return nil, formError("key file %s: %v", path, err)
	}
	defer wipe(data)
	if len(data) > opaqueKeyFileSizeMax {
		return nil, formError("key file %s is larger than %d bytes", path, opaqueKeyFileSizeMax)
	}
	return ParseOpaqueKeyRing(string(data), path)
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 0
	}
}

var (
	keyRingHeader  = regexp.MustCompile(`^\[\[[ \t]*key[ \t]*\]\][ \t]*(#.*)?$`)
	keyRingSetting = regexp.MustCompile(`^([A-Za-z0-9_-]+)[ \t]*=[ \t]*("[^"\\\x00-\x1f\x7f]*"|'[^'\x00-\x1f\x7f]*')[ \t]*(#.*)?$`)
	keyRingName    = regexp.MustCompile(`^([A-Za-z0-9_-]+)[ \t]*=`)
)

// ParseOpaqueKeyRing reads the text of a key file; source names it in messages (no file, so
// no mode check). Errors: ErrInvalidArgument, see the file's contract.
func ParseOpaqueKeyRing(text, source string) (*OpaqueKeyRing, error) {
	refuse := func(format string, args ...any) (*OpaqueKeyRing, error) {
		return nil, formError("%s: %s", source, fmt.Sprintf(format, args...))
	}
	if strings.HasPrefix(text, "\ufeff") {
		return refuse("line 1: a byte order mark; write the file as plain UTF-8")
	}
	top := map[string]string{}
	var tables []map[string]string // one per [[key]]
	for i, line := range strings.Split(text, "\n") {
		number := i + 1
		line = strings.Trim(strings.TrimSuffix(line, "\r"), " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			if !keyRingHeader.MatchString(line) {
				return refuse("line %d: the only table this file may have is [[key]]", number)
			}
			if len(tables) == opaqueKeyCountMax {
				return refuse("more than %d keys", opaqueKeyCountMax)
			}
			tables = append(tables, map[string]string{})
			continue
		}
		m := keyRingSetting.FindStringSubmatch(line)
		if m == nil {
			// Never the value itself: it may be a secret.
			if name := keyRingName.FindStringSubmatch(line); name != nil {
				return refuse("line %d: %s must be a one-line \"string\" without escapes", number, name[1])
			}
			return refuse("line %d: expected name = \"string\" or [[key]]", number)
		}
		name, value := m[1], m[2][1:len(m[2])-1]
		table, allowed, where := top, "current and [[key]]", "unknown setting"
		if len(tables) > 0 {
			table, allowed, where = tables[len(tables)-1], "only id and secret", fmt.Sprintf("key %d has an unknown setting", len(tables))
		}
		known := name == "current"
		if len(tables) > 0 {
			known = name == "id" || name == "secret"
		}
		if !known {
			return refuse("line %d: %s '%s' (%s)", number, where, name, allowed)
		}
		if _, twice := table[name]; twice {
			return refuse("line %d: %s is given twice", number, name)
		}
		table[name] = value
	}
	if len(tables) == 0 {
		return refuse("no key; add [[key]] with id = \"k1\" and secret = 32 hex digits")
	}
	ring := &OpaqueKeyRing{}
	for i, table := range tables {
		where := fmt.Sprintf("key %d", i+1)
		id, hasID := table["id"]
		secretHex, hasSecret := table["secret"]
		if !hasID || !hasSecret {
			return refuse("%s needs both id = \"...\" and secret = \"...\"", where)
		}
		var secret [SecretSize]byte
		raw, err := hex.DecodeString(secretHex)
		if err != nil || len(raw) != SecretSize {
			wipe(raw)
			return refuse("%s (%s): secret must be 32 hex digits (16 bytes)", where, id)
		}
		copy(secret[:], raw)
		wipe(raw)
		key, err := NewOpaqueKey(id, secret)
		if err != nil {
			return refuse("%s: %s", where, err.(*Error).Message)
		}
		if ring.Find(id) != nil {
			return refuse("key id '%s' appears twice", id)
		}
		ring.keys = append(ring.keys, key)
	}
	current, hasCurrent := top["current"]
	if !hasCurrent && len(ring.keys) > 1 {
		return refuse("%d keys and no current = \"ID\" saying which one encodes new IDs", len(ring.keys))
	}
	if hasCurrent {
		chosen := -1
		for i, key := range ring.keys {
			if key.hasID(current) {
				chosen = i
			}
		}
		if chosen < 0 {
			return refuse("current = %s names no key", quoted(current))
		}
		ring.current = chosen
	}
	return ring, nil
}
