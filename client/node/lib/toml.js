// client/node/lib/toml.js — the part of TOML that flurry's key files use, and nothing more:
// comments, `key = value` with values a "basic" or 'literal' string, an integer, a boolean or a
// one-line array of those, `[table]` and `[[array of tables]]` headers.
//
// Contract: parseToml(text, source) returns a plain object (arrays of tables as arrays of
// objects; integers as bigint when beyond a safe number, else number) or throws an Error whose
// message names `source` and the line, never a value (a key file's secret must not end up in a
// log). Anything outside the subset (dotted keys, inline tables, multi-line strings, floats,
// dates) is refused as such, so a file this reads means what the C++ client's toml++ reads.

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

class TomlError extends Error {}

function fail(source, line, what) {
  throw new TomlError(`${source}: line ${line}: ${what}`);
}

// Reads one value starting at text[at]; returns [value, next index].
function readValue(text, at, source, line) {
  const c = text[at];
  if (c === '"') {
    let out = '';
    for (let i = at + 1; i < text.length; ++i) {
      const ch = text[i];
      if (ch === '"') return [out, i + 1];
      if (ch !== '\\') {
        out += ch;
        continue;
      }
      const e = text[++i];
      const simple = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', '"': '"', '\\': '\\' }[e];
      if (simple !== undefined) {
        out += simple;
      } else if (e === 'u' || e === 'U') {
        const digits = e === 'u' ? 4 : 8;
        const hex = text.slice(i + 1, i + 1 + digits);
        if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== digits) fail(source, line, 'a bad \\u escape in a string');
        out += String.fromCodePoint(parseInt(hex, 16));
        i += digits;
      } else {
        fail(source, line, 'an unknown escape in a string');
      }
    }
    fail(source, line, 'a string that does not end on its line');
  }
  if (c === "'") {
    const end = text.indexOf("'", at + 1);
    if (end < 0) fail(source, line, 'a string that does not end on its line');
    return [text.slice(at + 1, end), end + 1];
  }
  if (c === '[') {
    const items = [];
    let i = skipSpace(text, at + 1);
    if (text[i] === ']') return [items, i + 1];
    for (;;) {
      const [item, next] = readValue(text, i, source, line);
      items.push(item);
      i = skipSpace(text, next);
      if (text[i] === ',') {
        i = skipSpace(text, i + 1);
        if (text[i] === ']') return [items, i + 1];
        continue;
      }
      if (text[i] === ']') return [items, i + 1];
      fail(source, line, 'an array must be one line of values separated by commas');
    }
  }
  const match = /^(true|false|[+-]?[0-9][0-9_]*)(?=$|[\s,\]#])/.exec(text.slice(at));
  if (!match) fail(source, line, 'a value that is not a string, a whole number, a boolean or an array');
  const word = match[1];
  if (word === 'true' || word === 'false') return [word === 'true', at + word.length];
  if (/__|_$|^[+-]?_/.test(word) || /^[+-]?0[0-9]/.test(word)) fail(source, line, 'a malformed whole number');
  const big = BigInt(word.replace(/_/g, ''));
  const value = big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
  return [value, at + word.length];
}

function skipSpace(text, at) {
  while (at < text.length && (text[at] === ' ' || text[at] === '\t')) ++at;
  return at;
}

function readKey(text, source, line) {
  const key = text.trim();
  if (BARE_KEY.test(key)) return key;
  const quoted = /^"([^"\\]*)"$/.exec(key) ?? /^'([^']*)'$/.exec(key);
  if (quoted) return quoted[1];
  fail(source, line, `'${key.slice(0, 40)}' is not a key this reader takes (bare or quoted, no dots)`);
}

/** Parses `text` (the TOML subset above); `source` names it in error messages. */
export function parseToml(text, source) {
  const root = {};
  let table = root;
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length; ++index) {
    const line = index + 1;
    const raw = lines[index];
    const start = skipSpace(raw, 0);
    if (start === raw.length || raw[start] === '#') continue;
    if (raw[start] === '[') {
      const header = /^\[(\[)?\s*([^\]]+?)\s*\](\])?\s*(#.*)?$/.exec(raw.slice(start));
      if (!header || Boolean(header[1]) !== Boolean(header[3])) fail(source, line, 'a malformed [table] header');
      const name = readKey(header[2], source, line);
      if (header[1]) {
        if (root[name] === undefined) root[name] = [];
        if (!Array.isArray(root[name])) fail(source, line, `[[${name}]] after ${name} was set otherwise`);
        table = {};
        root[name].push(table);
      } else {
        if (root[name] !== undefined) fail(source, line, `table [${name}] defined twice`);
        table = {};
        root[name] = table;
      }
      continue;
    }
    const equals = raw.indexOf('=', start);
    if (equals < 0) fail(source, line, 'expected key = value');
    const key = readKey(raw.slice(start, equals), source, line);
    const [value, next] = readValue(raw, skipSpace(raw, equals + 1), source, line);
    const rest = raw.slice(next).trim();
    if (rest !== '' && !rest.startsWith('#')) fail(source, line, 'something after the value');
    if (Object.prototype.hasOwnProperty.call(table, key)) fail(source, line, `key '${key}' set twice`);
    table[key] = value;
  }
  return root;
}

export { TomlError };
