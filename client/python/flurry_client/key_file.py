"""read_key_file: a client's signing key from a TOML file, with the C++ client's rules and
messages (client/key_file.cc).

Contract: the file must be a regular file of mode 0600 or stricter and at most 64 KiB, TOML
(tomllib) with `id = N` (1..4294967295) and `secret = "32 hex digits"` at the top level;
`name` is allowed (for people), any other key is refused so that a misspelt field does not go
unnoticed. Every refusal is InvalidArgumentError("key file PATH: why"), naming the line when
the TOML is malformed or holds an unknown key, and the fix when there is one.
"""

from __future__ import annotations

import os
import re
import stat
import string
import tomllib

from .auth import KEY_ID_MAX, SECRET_SIZE, Key
from .options import InvalidArgumentError

KEY_FILE_SIZE_MAX = 64 * 1024
_KNOWN = ("id", "secret", "name")
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)$")


def _refuse(path: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"key file {path}: {why}")


def _line_of(text: str, key: str) -> str:
    """"line N: " of the line that sets or opens `key` at the top level, "" if not found
    (tomllib reports no position for a valid but unknown key)."""
    quoted = re.escape(key)
    pattern = re.compile(rf"^\s*\[*\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*[.=\]]")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return f"line {number}: "
    return ""


def _secret(value: object) -> bytes | None:
    if (not isinstance(value, str) or len(value) != 2 * SECRET_SIZE
            or not set(value) <= set(string.hexdigits)):
        return None
    return bytes.fromhex(value)


def read_key_file(path: str) -> Key:
    """The Key of the key file at `path`. Errors: InvalidArgumentError (see above)."""
    try:
        # Checked before it is opened: opening a FIFO would block.
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, "not a regular file")
        if info.st_mode & 0o077:
            raise _refuse(path, f"may be read by group or others; run chmod 600 {path}")
        if info.st_size > KEY_FILE_SIZE_MAX:
            raise _refuse(path, "larger than 64 KiB: not a key file")
        with open(path, "rb") as file:
            raw = file.read(KEY_FILE_SIZE_MAX + 1)
    except OSError as error:
        raise _refuse(path, error.strerror or str(error)) from error
    try:
        text = raw.decode("utf-8")
        table = tomllib.loads(text)
    except UnicodeDecodeError as error:
        raise _refuse(path, f"not UTF-8 text (byte {error.start})") from error
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        at = _TOML_LINE.search(message)
        where = f"line {at.group(1)}: " if at else ""
        raise _refuse(path, where + _TOML_LINE.sub("", message).strip()) from error
    for name in table:
        if name not in _KNOWN:
            raise _refuse(path, f"{_line_of(text, name)}unknown key '{name}' "
                                "(expected id, secret, name)")
    key_id, secret = table.get("id"), table.get("secret")
    if not isinstance(key_id, int) or isinstance(key_id, bool) or not isinstance(secret, str):
        raise _refuse(path, "needs id = N and secret = \"32 hex digits\"")
    if not 1 <= key_id <= KEY_ID_MAX:
        raise _refuse(path, f"id must be a whole number in 1..{KEY_ID_MAX}")
    secret_bytes = _secret(secret)
    if secret_bytes is None:
        raise _refuse(path, f"secret must be \"32 hex digits\" ({SECRET_SIZE} bytes)")
    return Key(key_id, secret_bytes)
