"""Parser of the test vectors of proto/PROTOCOL.md ("Test vectors"): fenced blocks whose first
line is `vector: NAME`, every other line `key: value`. Repeated keys (hex, range) are kept in
order as lists; every other key keeps its one value."""

from __future__ import annotations

import re

_BLOCK = re.compile(r"^```\n(vector: .*?)^```", re.MULTILINE | re.DOTALL)
_REPEATED = {"hex", "range"}


def parse_fields(text: str) -> dict[str, str]:
    """"a=1 b=0x2" into {"a": "1", "b": "0x2"} (values left as text)."""
    return dict(item.split("=", 1) for item in text.split())


def number(text: str) -> int:
    return int(text, 0)


def load(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as file:
        document = file.read()
    vectors: dict[str, dict] = {}
    for block in _BLOCK.findall(document):
        vector: dict = {"hex": [], "range": []}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            value = value.strip()
            if key in _REPEATED:
                vector[key].append(value)
            else:
                assert key not in vector, f"key {key!r} twice in vector {vector.get('vector')}"
                vector[key] = value
        name = vector["vector"]
        assert name not in vectors, f"vector {name} defined twice"
        vector["bytes"] = bytes.fromhex("".join(vector["hex"]).replace(" ", ""))
        vectors[name] = vector
    return vectors
