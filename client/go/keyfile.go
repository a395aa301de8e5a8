// keyfile.go — ReadKeyFile: a client's signing key from the file the C++ client reads
// (client/key_file.cc): TOML with `id = N` and `secret = "32 hex digits"` at the top level,
// `name` allowed (for people), comments and blank lines allowed, refused unless the file is
// mode 0600 or stricter. The package depends on nothing outside the standard library, so this
// reads the small part of TOML such a file uses — one `key = value` per line, a value a whole
// number or a one-line string — and refuses anything else naming the line, as it refuses
// unknown keys, so a misspelt field does not go unnoticed. An error names the key and the line,
// never a value: the secret's line may be misquoted, and errors end up in logs.

package flurry

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// keyFileSizeMax: anything larger is not a key file.
const keyFileSizeMax = 64 * 1024

var (
	// key = value, the value a one-line string (a '#' inside it is part of it) or a bare word;
	// then an optional comment.
	keyFileLine   = regexp.MustCompile(`^([A-Za-z0-9_-]+)\s*=\s*("[^"\\]*"|'[^']*'|[^\s#"']*)\s*(#.*)?$`)
	keyFileNumber = regexp.MustCompile(`^[+-]?(0|[1-9](_?[0-9])*)$`) // TOML: no leading zero
)

// ReadKeyFile reads a client key file (the C++ client's read_key_file).
// Errors: ErrInvalidArgument naming the file and what is wrong with it (the fix when known):
// it cannot be read, is not a regular file, may be read by group or others, is larger than
// 64 KiB, has a line that is not `key = value` (named by its number), a key other than id,
// secret and name or one given twice, lacks id or secret, has an id outside 1..4294967295 or a
// secret that is not 32 hex digits.
func ReadKeyFile(path string) (Key, error) {
	refuse := func(format string, args ...any) (Key, error) {
		return Key{}, newError(CodeInvalidArgument, "key file "+path+": "+fmt.Sprintf(format, args...))
	}
	info, err := os.Stat(path)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // "no such file or directory", as strerror says it
		}
		return refuse("%v", err)
	}
	switch {
	case !info.Mode().IsRegular():
		return refuse("not a regular file")
	case info.Mode().Perm()&0o077 != 0:
		return refuse("may be read by group or others; run chmod 600 %s", path)
	case info.Size() > keyFileSizeMax:
		return refuse("larger than 64 KiB: not a key file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return refuse("%v", err)
	}
	values := map[string]string{} // key: its value as written (a string without its quotes)
	quoted := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := keyFileLine.FindStringSubmatch(line)
		if m == nil {
			return refuse("line %d: expected key = value, the value a whole number or a one-line \"string\"", i+1)
		}
		key, value := m[1], m[2]
		if value != "" && (value[0] == '"' || value[0] == '\'') {
			value, quoted[key] = value[1:len(value)-1], true
		} else if !keyFileNumber.MatchString(value) {
			// Never the value itself: it may be the secret.
			return refuse("line %d: %s's value is neither a whole number nor a one-line \"string\"", i+1, key)
		}
		if key != "id" && key != "secret" && key != "name" {
			return refuse("line %d: unknown key '%s' (expected id, secret, name)", i+1, key)
		}
		if _, twice := values[key]; twice {
			return refuse("line %d: %s is given twice", i+1, key)
		}
		values[key] = value
	}
	idText, hasID := values["id"]
	secret, hasSecret := values["secret"]
	if !hasID || !hasSecret {
		return refuse("needs id = N and secret = \"32 hex digits\"")
	}
	id, err := strconv.ParseInt(strings.ReplaceAll(idText, "_", ""), 10, 64)
	if quoted["id"] || err != nil || id < 1 || id > 0xffffffff {
		return refuse("id must be a whole number in 1..4294967295")
	}
	raw, err := hex.DecodeString(secret)
	if !quoted["secret"] || err != nil || len(raw) != SecretSize {
		return refuse("secret must be \"32 hex digits\" (16 bytes)")
	}
	k := Key{ID: uint32(id)}
	copy(k.Secret[:], raw)
	return k, nil
}
