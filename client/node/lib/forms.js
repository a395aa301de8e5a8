// client/node/lib/forms.js — the text forms of a flurry ID (client/forms.h, README "ID forms"),
// formatted and parsed in the client: dec, hex, base32, readable, opaque and uuid.
//
// Contract: pure functions of the ID (bigint, or a safe whole number, or a decimal string)
// and, where named, a Layout or a KeyRing. Formatting returns a string; parsing returns a
// bigint (readable: {id, tag}). Every failure throws FlurryError invalid_argument with one
// sentence saying what is wrong with the input (the C++ client's wording). Nothing here keeps
// state beyond its arguments; ReadableForm, OpaqueKey and KeyRing are immutable once made.
//
//   dec       decimal, no padding: "4194324487"; parsing takes 1..19 digits below 2^63.
//   hex       "0x" + 16 lower-case digits; parsing takes 0x/0X and 1..16 digits, either case.
//   base32    Crockford, 13 symbols, upper case, so string order is numeric order; parsing
//             takes lower case and the aliases I, L -> 1 and O -> 0.
//   readable  TIME TAG REST: the UTC instant truncated to the unit (YYMMDDHHmmss + SSS, SS or
//             nothing), a 0..4 char tag of [A-Z0-9], the bits below time as zero-padded
//             decimal. Needs the layout.
//   opaque    "KEYID_" + base32 of a keyed 10-round Feistel permutation of [0, 2^63)
//             (SipHash-2-4 round function); every key of a KeyRing decodes, `current` encodes.
//   uuid      RFC 9562 version 7: unix_ts_ms = the ID's instant, the 63-bit ID in the low bits
//             of rand_a:rand_b. Needs the layout.

import { FlurryError, invalidArgument } from './errors.js';
import { readSecretFile, parseKeyToml, secretFromHex } from './keys.js';
import { Layout, daysFromCivil, daysInMonth, formatUnixMs, utcFields } from './layout.js';
import { sipHashWords } from './siphash.js';

export const FORMS = Object.freeze(['dec', 'hex', 'readable', 'base32', 'opaque', 'uuid']);
export const ID_MAX = (1n << 63n) - 1n;
export const TAG_SIZE_MAX = 4;
export const KEY_ID_SIZE_MAX = 8;
export const OPAQUE_ROUNDS = 10;
export const KEY_COUNT_MAX = 64;
const DEC_SIZE_MAX = 19;
const BASE32_SIZE = 13;
const UUID_SIZE = 36;
const BASE32_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'; // Crockford: no I, L, O, U

function fail(message) {
  throw new FlurryError('invalid_argument', message);
}

// Untrusted text for a message, cut to a readable length.
function quoted(text) {
  const shown = 48;
  return `'${text.slice(0, shown)}${text.length > shown ? "...'" : "'"}`;
}

/** An ID as bigint from a bigint, a safe whole number or a decimal string; below 2^63. */
export function toId(value) {
  let id;
  if (typeof value === 'bigint') id = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) id = BigInt(value);
  else if (typeof value === 'string' && /^[0-9]{1,19}$/.test(value)) id = BigInt(value);
  else fail(`${typeof value === 'string' ? quoted(value) : String(value)} is not an ID (a bigint, a safe whole number or a decimal string)`);
  if (id < 0n || id > ID_MAX) fail(`ID ${id} is not in 0..2^63-1`);
  return id;
}

function requireText(text) {
  if (typeof text !== 'string') fail('the text to parse must be a string');
  return text;
}

// ---- dec, hex, base32 ----

export function formatDec(id) {
  return toId(id).toString();
}

export function parseDec(text) {
  requireText(text);
  if (!/^[0-9]{1,19}$/.test(text) || BigInt(text) > ID_MAX) {
    fail(`${quoted(text)} is not a decimal ID (1 to ${DEC_SIZE_MAX} digits, below 2^63)`);
  }
  return BigInt(text);
}

export function formatHex(id) {
  return `0x${toId(id).toString(16).padStart(16, '0')}`;
}

export function parseHex(text) {
  requireText(text);
  if (!/^0[xX][0-9A-Fa-f]{1,16}$/.test(text) || BigInt(`0x${text.slice(2)}`) > ID_MAX) {
    fail(`${quoted(text)} is not a hexadecimal ID (0x and 1 to 16 hex digits, below 2^63)`);
  }
  return BigInt(`0x${text.slice(2)}`);
}

/** Any 64-bit value as 13 Crockford symbols (the opaque form writes its permuted number so). */
export function formatBase32(value) {
  const v = typeof value === 'bigint' ? value : toId(value);
  if (v < 0n || v >> 64n !== 0n) fail(`${v} is not a 64-bit value`);
  let out = '';
  for (let i = 0; i < BASE32_SIZE; ++i) out += BASE32_ALPHABET[Number((v >> BigInt(5 * (BASE32_SIZE - 1 - i))) & 31n)];
  return out;
}

function base32Symbol(c) {
  let u = c.toUpperCase();
  if (u === 'I' || u === 'L') u = '1';
  if (u === 'O') u = '0';
  return u.length === 1 ? BASE32_ALPHABET.indexOf(u) : -1; // U is not in it
}

export function parseBase32(text) {
  requireText(text);
  if (text.length !== BASE32_SIZE) {
    fail(`${quoted(text)} is not base32: it has ${text.length} chars, a base32 ID has 13`);
  }
  let value = 0n;
  for (let i = 0; i < text.length; ++i) {
    const symbol = base32Symbol(text[i]);
    if (symbol < 0) {
      fail(`${quoted(text)} is not base32: '${text[i]}' at position ${i + 1} is not a Crockford symbol (0-9, A-Z but U)`);
    }
    // 13 symbols carry 65 bits; an ID's 63 leave the first symbol 0..7.
    if (i === 0 && symbol > 7) fail(`${quoted(text)} is not base32 of an ID: it is 2^63 or more (the first symbol must be 0-7)`);
    value = (value << 5n) | BigInt(symbol);
  }
  return value;
}

function checkFits(layout, id) {
  if (!layout.fits(id)) fail(`ID ${id} has bits above the layout's ${layout.idBits} bits; is it from another layout?`);
}

function requireLayout(layout, form) {
  if (!(layout instanceof Layout)) fail(`the ${form} form needs the ID layout (a Layout)`);
  return layout;
}

// ---- uuid ----

const UUID_DASHES = new Set([8, 13, 18, 23]);
const LOW_62 = (1n << 62n) - 1n;

export function formatUuid(layout, id) {
  requireLayout(layout, 'uuid');
  const value = toId(id);
  checkFits(layout, value);
  const unixMs = layout.decode(value).unixMs;
  if (unixMs >> 48n !== 0n) {
    fail(`ID ${value} is of ${formatUnixMs(unixMs)}, past what a UUID's 48 bits of milliseconds hold (the year 10889)`);
  }
  // hi: unix_ts_ms (48) | ver (4) | rand_a (12); lo: var (2) | rand_b (62). rand_a:rand_b = id.
  const hi = (unixMs << 16n) | (7n << 12n) | (value >> 62n);
  const lo = (2n << 62n) | (value & LOW_62);
  const hex = hi.toString(16).padStart(16, '0') + lo.toString(16).padStart(16, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function parseUuid(layout, text) {
  requireLayout(layout, 'uuid');
  requireText(text);
  if (text.length !== UUID_SIZE) {
    fail(`${quoted(text)} is not a UUID: it has ${text.length} chars, a UUID has 36 (8-4-4-4-12 hex digits)`);
  }
  let digits = '';
  for (let i = 0; i < UUID_SIZE; ++i) {
    if (UUID_DASHES.has(i)) {
      if (text[i] !== '-') fail(`${quoted(text)} is not a UUID: position ${i + 1} must be '-'`);
      continue;
    }
    if (!/[0-9A-Fa-f]/.test(text[i])) fail(`${quoted(text)} is not a UUID: '${text[i]}' at position ${i + 1} is not a hex digit`);
    digits += text[i];
  }
  const hi = BigInt(`0x${digits.slice(0, 16)}`);
  const lo = BigInt(`0x${digits.slice(16)}`);
  const version = (hi >> 12n) & 0xfn;
  if (version !== 7n) fail(`${quoted(text)} is not a flurry UUID: its version is ${version}, flurry writes version 7`);
  if (lo >> 62n !== 2n) fail(`${quoted(text)} is not a flurry UUID: its variant is not RFC 9562's (10 in binary)`);
  if (((hi >> 1n) & 0x7ffn) !== 0n) fail(`${quoted(text)} is not a flurry UUID: the 11 bits above the ID are not 0`);
  const id = ((hi & 1n) << 62n) | (lo & LOW_62);
  if (!layout.fits(id)) {
    fail(`${quoted(text)} is not a UUID of this layout: ID ${id} has bits above the layout's ${layout.idBits} bits; is it from another layout?`);
  }
  const unixMs = hi >> 16n;
  const expected = layout.decode(id).unixMs;
  if (unixMs !== expected) {
    fail(
      `${quoted(text)} is not a UUID of this layout: its time is ${formatUnixMs(unixMs)}, ` +
        `the ID inside it is of ${formatUnixMs(expected)} (another epoch or layout?)`,
    );
  }
  return id;
}

// ---- readable ----

function decimalDigits(value) {
  return value.toString().length;
}

function checkTag(tag) {
  if (typeof tag !== 'string') fail('a tag must be a string');
  if (tag.length > TAG_SIZE_MAX) fail(`tag ${quoted(tag)} is longer than 4 chars`);
  if (!/^[A-Z0-9]*$/.test(tag)) fail(`tag ${quoted(tag)} may hold only A-Z and 0-9`);
}

export class ReadableForm {
  /** Throws FlurryError invalid_argument when the layout does not validate (clock aside). */
  constructor(layout) {
    requireLayout(layout, 'readable');
    try {
      layout.validate();
    } catch (error) {
      fail(`readable form: ${error.message}`);
    }
    this.layout = layout;
    const firstYear = utcFields(layout.epochMs).year;
    const lastYear = utcFields(layout.endUnixMs).year;
    this.yearDigits = firstYear >= 2000 && lastYear <= 2099 ? 2 : Math.max(4, decimalDigits(lastYear));
    this.fractionDigits = layout.timeUnitMs === 1 ? 3 : layout.timeUnitMs === 10 ? 2 : 0;
    this.restBits = layout.nodeBits + layout.sequenceBits;
    this.restDigits = decimalDigits((1n << BigInt(this.restBits)) - 1n);
    Object.freeze(this);
  }

  get timeDigits() {
    return this.yearDigits + 10 + this.fractionDigits;
  }

  /** The length of a readable ID with a tag of `tagSize` chars. */
  size(tagSize = 0) {
    return this.timeDigits + tagSize + this.restDigits;
  }

  format(id, tag = '') {
    const value = toId(id);
    checkFits(this.layout, value);
    checkTag(tag);
    const t = utcFields(this.layout.decode(value).unixMs);
    const year = this.yearDigits === 2 ? t.year - 2000 : t.year;
    const pad = (v, w) => String(v).padStart(w, '0');
    const fraction = this.fractionDigits === 0 ? '' : pad(Math.floor(t.ms / 10 ** (3 - this.fractionDigits)), this.fractionDigits);
    const rest = value & ((1n << BigInt(this.restBits)) - 1n);
    return (
      pad(year, this.yearDigits) +
      pad(t.month, 2) +
      pad(t.day, 2) +
      pad(t.hour, 2) +
      pad(t.minute, 2) +
      pad(t.second, 2) +
      fraction +
      tag +
      rest.toString().padStart(this.restDigits, '0')
    );
  }

  /** {id, tag}; throws naming the first thing wrong. */
  parse(text) {
    requireText(text);
    const bare = this.size(0);
    if (text.length < bare || text.length > bare + TAG_SIZE_MAX) {
      fail(`${quoted(text)} is not a readable ID of this layout: it has ${text.length} chars, not ${bare} to ${bare + TAG_SIZE_MAX}`);
    }
    const tagSize = text.length - bare;
    const tag = text.slice(this.timeDigits, this.timeDigits + tagSize);
    const restText = text.slice(this.timeDigits + tagSize);
    let time;
    try {
      time = this.#parseTime(text.slice(0, this.timeDigits));
    } catch (error) {
      fail(`${quoted(text)} is not a readable ID: ${error.message}`);
    }
    try {
      checkTag(tag);
    } catch (error) {
      fail(`${quoted(text)} is not a readable ID: ${error.message}`);
    }
    if (!/^[0-9]{1,19}$/.test(restText) || BigInt(restText) >> BigInt(this.restBits) !== 0n) {
      fail(`${quoted(text)} is not a readable ID: its last ${this.restDigits} chars must be a number below 2^${this.restBits}`);
    }
    return { id: (time << BigInt(this.restBits)) | BigInt(restText), tag };
  }

  // The time field of TIME digits (length already checked).
  #parseTime(digits) {
    if (!/^[0-9]+$/.test(digits)) fail(`its first ${this.timeDigits} chars (the time) must be digits`);
    let at = 0;
    const take = (width) => Number(digits.slice(at, (at += width)));
    const year = take(this.yearDigits) + (this.yearDigits === 2 ? 2000 : 0);
    const month = take(2);
    const day = take(2);
    const hour = take(2);
    const minute = take(2);
    const second = take(2);
    const fraction = this.fractionDigits === 0 ? 0 : take(this.fractionDigits);
    const real =
      month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month) && hour <= 23 && minute <= 59 && second <= 59;
    const seconds = real ? daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second : -1;
    if (seconds < 0) fail(`its time ${digits} is not a real UTC date and time`);
    const unit = BigInt(this.layout.timeUnitMs);
    const unixMs = BigInt(seconds) * 1000n + BigInt(fraction * 10 ** (3 - this.fractionDigits));
    const firstUnit = this.layout.epochMs / unit;
    if (unixMs / unit < firstUnit || unixMs / unit - firstUnit > this.layout.timeMax) {
      fail(
        `its time ${formatUnixMs(unixMs)} is outside the layout (${formatUnixMs(this.layout.epochMs)} to ` +
          `${formatUnixMs(this.layout.endUnixMs)})`,
      );
    }
    return unixMs / unit - firstUnit;
  }
}

// ---- opaque ----

const roundInput = new Uint8Array(8);
const roundOutput = new Uint32Array(2);

// F_i(half) = SipHash-2-4(key, LE64(half | i << 32 | 0x66 << 56)); only its low 32 bits are
// used (a half is at most 32 bits wide).
function roundFunction(secret, round, half) {
  roundInput[0] = half & 0xff;
  roundInput[1] = (half >>> 8) & 0xff;
  roundInput[2] = (half >>> 16) & 0xff;
  roundInput[3] = half >>> 24;
  roundInput[4] = round;
  roundInput[5] = 0;
  roundInput[6] = 0;
  roundInput[7] = 0x66; // 'f', a domain byte
  sipHashWords(secret, roundInput, 0, 8, roundOutput);
  return roundOutput[1];
}

// The left half is 31 bits wide before even rounds, 32 before odd ones.
function lowBitsBefore(value, round) {
  return round % 2 === 0 ? value & 0x7fffffff : value >>> 0;
}

export class OpaqueKey {
  /**
   * @param {string} id 1..8 chars of a-z and 0-9 (the opaque text starts with it)
   * @param {Uint8Array|string} secret 16 bytes or 32 hex digits, not all zero
   */
  constructor(id, secret) {
    if (typeof id !== 'string' || !/^[a-z0-9]{1,8}$/.test(id)) fail(`key id ${quoted(String(id))} must be 1 to 8 chars of a-z and 0-9`);
    const bytes = typeof secret === 'string' ? secretFromHex(secret) : secret instanceof Uint8Array && secret.length === 16 ? Uint8Array.from(secret) : null;
    if (bytes === null) fail(`key ${id}: the secret must be 16 bytes or 32 hex digits`);
    if (bytes.every((b) => b === 0)) fail(`key ${id}: the secret is all zero; generate one with: head -c 16 /dev/urandom | xxd -p`);
    this.id = id;
    this.#secret = bytes;
    Object.freeze(this);
  }

  #secret;

  /** The permutation of [0, 2^63): a bigint below 2^63. */
  encrypt(x) {
    const value = toId(x);
    let left = Number(value >> 32n);
    let right = Number(value & 0xffffffffn);
    for (let round = 0; round < OPAQUE_ROUNDS; ++round) {
      const mixed = lowBitsBefore(left ^ roundFunction(this.#secret, round, right), round);
      left = right;
      right = mixed;
    }
    return (BigInt(left) << 32n) | BigInt(right);
  }

  decrypt(y) {
    const value = toId(y);
    let left = Number(value >> 32n);
    let right = Number(value & 0xffffffffn);
    for (let round = OPAQUE_ROUNDS - 1; round >= 0; --round) {
      const before = lowBitsBefore(right ^ roundFunction(this.#secret, round, left), round);
      right = left;
      left = before;
    }
    return (BigInt(left) << 32n) | BigInt(right);
  }

  /** Whether `id` is this key's id, ignoring case. */
  hasId(id) {
    return typeof id === 'string' && id.toLowerCase() === this.id;
  }

  /** "<id>_<13 base32 chars of encrypt(id)>". */
  format(id) {
    return `${this.id}_${formatBase32(this.encrypt(id))}`;
  }

  /** Decrypts an opaque text made with this key; throws when it names another key or is malformed. */
  parse(text) {
    const keyId = opaqueKeyId(text);
    if (!this.hasId(keyId)) fail(`${quoted(text)} was made with key '${keyId}', not '${this.id}'`);
    let value;
    try {
      value = parseBase32(text.slice(keyId.length + 1));
    } catch (error) {
      fail(`opaque ID ${error.message}`);
    }
    return this.decrypt(value);
  }
}

/** The key id of an opaque text ("k1" of "k1_2TJVZN1P765Y3"); throws when it is not one. */
export function opaqueKeyId(text) {
  requireText(text);
  const separator = text.indexOf('_');
  if (separator < 1 || separator > KEY_ID_SIZE_MAX || text.length !== separator + 1 + BASE32_SIZE || !/^[A-Za-z0-9]+$/.test(text.slice(0, separator))) {
    fail(`${quoted(text)} is not an opaque ID (KEYID_ and 13 base32 chars, e.g. k1_2TJVZN1P765Y3)`);
  }
  return text.slice(0, separator);
}

/**
 * The keys of the opaque form: every key decodes (a text names its key), `current` encodes.
 * To rotate, add a key and point `current` at it.
 */
export class KeyRing {
  /**
   * @param {Array<OpaqueKey|{id: string, secret: Uint8Array|string}>} keys 1..64, ids unique
   * @param {string} [current] the id of the key that encodes; may be left out with one key
   */
  constructor(keys, current) {
    if (!Array.isArray(keys) || keys.length === 0) fail('a key ring needs at least one key');
    if (keys.length > KEY_COUNT_MAX) fail(`more than ${KEY_COUNT_MAX} keys`);
    this.keys = Object.freeze(keys.map((key) => (key instanceof OpaqueKey ? key : new OpaqueKey(key.id, key.secret))));
    const ids = new Set();
    for (const key of this.keys) {
      if (ids.has(key.id)) fail(`key id '${key.id}' appears twice`);
      ids.add(key.id);
    }
    if (current === undefined && this.keys.length > 1) {
      fail(`${this.keys.length} keys and no current = "ID" saying which one encodes new IDs`);
    }
    const chosen = current === undefined ? this.keys[0] : this.find(current);
    if (chosen === null) fail(`current = "${current}" names no key`);
    this.current = chosen;
    Object.freeze(this);
  }

  /**
   * From the TOML of an opaque key file: `current = "k2"` and [[key]] tables of id and secret.
   * `source` names it in messages.
   */
  static parse(tomlText, source = 'key file') {
    const root = parseKeyToml(tomlText, source);
    for (const name of Object.keys(root)) {
      if (name !== 'key' && name !== 'current') fail(`${source}: unknown setting '${name}' (current and [[key]])`);
    }
    if ((root.key !== undefined && !Array.isArray(root.key)) || (root.current !== undefined && typeof root.current !== 'string')) {
      fail(`${source}: key must be [[key]] tables and current a string such as "k1"`);
    }
    if (root.key === undefined || root.key.length === 0) {
      fail(`${source}: no key; add [[key]] with id = "k1" and secret = 32 hex digits`);
    }
    const keys = root.key.map((table, index) => {
      const where = `${source}: key ${index + 1}`;
      for (const name of Object.keys(table)) {
        if (name !== 'id' && name !== 'secret') fail(`${where} has an unknown setting '${name}' (only id and secret)`);
      }
      if (typeof table.id !== 'string' || typeof table.secret !== 'string') fail(`${where} needs both id = "..." and secret = "..."`);
      const secret = secretFromHex(table.secret);
      if (secret === null) fail(`${where} (${table.id}): secret must be 32 hex digits (16 bytes)`);
      try {
        return new OpaqueKey(table.id, secret);
      } catch (error) {
        fail(`${where}: ${error.message}`);
      }
    });
    try {
      return new KeyRing(keys, root.current);
    } catch (error) {
      fail(`${source}: ${error.message}`);
    }
  }

  /** Reads an opaque key file (mode 0600 or stricter). Rejects FlurryError invalid_argument. */
  static async load(path) {
    return KeyRing.parse(await readSecretFile(path), path);
  }

  /** The key with this id (ignoring case), or null. */
  find(id) {
    return this.keys.find((key) => key.hasId(id)) ?? null;
  }

  encode(id) {
    return this.current.format(id);
  }

  /** Decodes an opaque text with the key it names. */
  decode(text) {
    const keyId = opaqueKeyId(text);
    const key = this.find(keyId);
    if (key === null) fail(`opaque ID '${text}' names key '${keyId}', which the key file lacks`);
    return key.parse(text);
  }
}

// ---- any form ----

const readableForms = new WeakMap();

function readableOf(layout) {
  let form = readableForms.get(layout);
  if (form === undefined) {
    form = new ReadableForm(layout);
    readableForms.set(layout, form);
  }
  return form;
}

function checkOptions(form, options) {
  if (!FORMS.includes(form)) fail(`unknown ID form '${String(form)}' (${FORMS.join(', ')})`);
  if ((form === 'readable' || form === 'uuid') && !(options.layout instanceof Layout)) fail(`the ${form} form needs the ID layout`);
  if (form === 'opaque' && !(options.keys instanceof KeyRing)) fail('the opaque form needs a key ring (KeyRing)');
}

/**
 * `id` in `form`. options: {layout} for readable and uuid, {tag} for readable only, {keys} (a
 * KeyRing) for opaque.
 */
export function formatId(form, id, options = {}) {
  checkOptions(form, options);
  if (form !== 'readable' && options.tag) fail('a tag is part of the readable form only');
  switch (form) {
    case 'dec':
      return formatDec(id);
    case 'hex':
      return formatHex(id);
    case 'base32':
      return formatBase32(toId(id));
    case 'readable':
      return readableOf(options.layout).format(id, options.tag ?? '');
    case 'opaque':
      return options.keys.encode(id);
    default:
      return formatUuid(options.layout, id);
  }
}

/** Text in `form`: {form, id, tag} (tag: readable's, else ''), plus keyId for opaque. */
export function parseId(form, text, options = {}) {
  checkOptions(form, options);
  switch (form) {
    case 'dec':
      return { form, id: parseDec(text), tag: '' };
    case 'hex':
      return { form, id: parseHex(text), tag: '' };
    case 'base32':
      return { form, id: parseBase32(text), tag: '' };
    case 'readable':
      return { form, ...readableOf(options.layout).parse(text) };
    case 'opaque':
      return { form, id: options.keys.decode(text), tag: '', keyId: opaqueKeyId(text) };
    default:
      return { form, id: parseUuid(options.layout, text), tag: '' };
  }
}

/**
 * Text in whichever form reads it (readable and uuid only with options.layout, opaque with
 * options.keys). Throws when none does (naming the likeliest form's reason) or when two do (a
 * 13-digit number is both dec and base32): then pass the form to parseId.
 */
export function parseAnyId(text, options = {}) {
  requireText(text);
  let likeliest = 'dec';
  if (/^0[xX]./.test(text)) likeliest = 'hex';
  try {
    opaqueKeyId(text);
    likeliest = 'opaque';
  } catch {
    // not shaped as opaque
  }
  if (text.length === BASE32_SIZE) likeliest = 'base32';
  if (options.layout && text.length > DEC_SIZE_MAX) likeliest = 'readable';
  if (options.layout && text.length === UUID_SIZE && text.includes('-')) likeliest = 'uuid';
  let found = null;
  for (const form of ['hex', 'dec', 'base32', 'readable', 'opaque', 'uuid']) {
    if ((form === 'readable' || form === 'uuid') && !options.layout) continue;
    if (form === 'opaque' && !options.keys) continue;
    let parsed;
    try {
      parsed = parseId(form, text, options);
    } catch {
      continue;
    }
    if (found !== null) {
      fail(`'${text}' reads as ${found.form} (${found.id}) and as ${form} (${parsed.id}); say which form it is`);
    }
    found = parsed;
  }
  if (found !== null) return found;
  parseId(likeliest, text, options); // throws the likeliest form's reason
  throw invalidArgument(`'${text}' is not an ID in any form`);
}
