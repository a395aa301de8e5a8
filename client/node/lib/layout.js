// client/node/lib/layout.js — the bit layout of a flurry ID (proto/layout.h, PROTOCOL.md "The
// ID"): decode an ID into time, node, core and counter, compose one back, check a layout, and
// the UTC calendar the readable form and messages use.
//
// Contract: an ID is `0 | time | node field | sequence field` (most significant first); core
// bits are the top of the sequence field (coreFrom 'sequence', the default) or the bottom of
// the node field ('node'). IDs, times and Unix milliseconds are bigint (a 50-bit time field of
// 1 s units reaches past what a JavaScript number holds exactly); widths, node, core and
// counter are numbers. A Layout is immutable. validate() throws FlurryError invalid_argument
// with the C++ message (proto::validate); nothing else here throws on a valid layout.

import { FlurryError, invalidArgument } from './errors.js';

export const DEFAULT_EPOCH_MS = 1704067200000n; // 2024-01-01T00:00:00Z
const TIME_RANGE_MIN_MS = (30n * 36525n * 86400000n) / 100n; // 30 years of 365.25 days
const ID_BITS_MAX = 63;

function toBigIntMs(value, what) {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) return BigInt(value);
  throw invalidArgument(`${what} must be a whole number of milliseconds (bigint, number or decimal string)`);
}

// An ID given as a bigint, a safe whole number or a decimal string.
function idOf(id) {
  if (typeof id === 'bigint') return id;
  if ((typeof id === 'number' && Number.isSafeInteger(id)) || (typeof id === 'string' && /^[0-9]{1,19}$/.test(id))) return BigInt(id);
  throw invalidArgument(`${String(id)} is not an ID (a bigint, a safe whole number or a decimal string)`);
}

function mask(bits) {
  return (1n << BigInt(bits)) - 1n;
}

export class Layout {
  /**
   * @param {object} [fields] timeBits 41, nodeBits 10, sequenceBits 12, coreBits 0,
   *   coreFrom 'sequence' ('node', or INFO's 0 / 1), epochMs 1704067200000n, timeUnitMs 1.
   */
  constructor(fields = {}) {
    this.timeBits = fields.timeBits ?? 41;
    this.nodeBits = fields.nodeBits ?? 10;
    this.sequenceBits = fields.sequenceBits ?? 12;
    this.coreBits = fields.coreBits ?? 0;
    const from = fields.coreFrom ?? 'sequence';
    if (from !== 'sequence' && from !== 'node' && from !== 0 && from !== 1) {
      throw invalidArgument(`coreFrom must be 'sequence' or 'node', not ${String(from)}`);
    }
    this.coreFrom = from === 'node' || from === 1 ? 'node' : 'sequence';
    this.epochMs = toBigIntMs(fields.epochMs ?? DEFAULT_EPOCH_MS, 'epochMs');
    this.timeUnitMs = fields.timeUnitMs ?? 1;
    for (const name of ['timeBits', 'nodeBits', 'sequenceBits', 'coreBits', 'timeUnitMs']) {
      if (!Number.isInteger(this[name]) || this[name] < 0 || this[name] > 0xffff) {
        throw invalidArgument(`layout ${name} must be a whole number, not ${String(this[name])}`);
      }
    }
    Object.freeze(this);
  }

  /** "snowflake" (41/10/12, 1 ms) or "js-safe" (37/5/11, 10 ms), default epoch. */
  static preset(name) {
    if (name === 'snowflake') return new Layout();
    if (name === 'js-safe') return new Layout({ timeBits: 37, nodeBits: 5, sequenceBits: 11, timeUnitMs: 10 });
    throw invalidArgument(`unknown layout preset '${String(name)}' (snowflake or js-safe)`);
  }

  /** The layout an INFO answer describes (not validated: call validate() before trusting it). */
  static fromInfo(info) {
    return new Layout({
      timeBits: info.timeBits,
      nodeBits: info.nodeBits,
      sequenceBits: info.sequenceBits,
      coreBits: info.coreBits,
      coreFrom: info.coreFrom,
      epochMs: info.epochMs,
      timeUnitMs: info.timeUnitMs,
    });
  }

  get timeMax() {
    return mask(this.timeBits);
  }
  get nodeIdBits() {
    return this.coreFrom === 'node' ? this.nodeBits - this.coreBits : this.nodeBits;
  }
  get counterBits() {
    return this.coreFrom === 'sequence' ? this.sequenceBits - this.coreBits : this.sequenceBits;
  }
  /** IDs one core issues in one time unit: what one range holds at most. */
  get counterCapacity() {
    return 2 ** this.counterBits;
  }
  get idBits() {
    return this.timeBits + this.nodeBits + this.sequenceBits;
  }
  /** Unix milliseconds of the last instant the layout represents. */
  get endUnixMs() {
    return this.epochMs + (this.timeMax + 1n) * BigInt(this.timeUnitMs) - 1n;
  }

  /** Whether `id` (bigint) has no bit above the layout's time + node + sequence bits. */
  fits(id) {
    const value = idOf(id);
    return value >= 0n && value >> BigInt(this.idBits) === 0n;
  }

  /** {time, unixMs} as bigint; node, core, counter as numbers. */
  decode(given) {
    const id = idOf(given);
    const sequenceField = id & mask(this.sequenceBits);
    const nodeField = (id >> BigInt(this.sequenceBits)) & mask(this.nodeBits);
    const time = (id >> BigInt(this.nodeBits + this.sequenceBits)) & this.timeMax;
    const coreMask = mask(this.coreBits);
    let node;
    let core;
    let counter;
    if (this.coreFrom === 'sequence') {
      node = nodeField;
      core = (sequenceField >> BigInt(this.counterBits)) & coreMask;
      counter = sequenceField & mask(this.counterBits);
    } else {
      node = nodeField >> BigInt(this.coreBits);
      core = nodeField & coreMask;
      counter = sequenceField;
    }
    return {
      time,
      unixMs: this.epochMs + time * BigInt(this.timeUnitMs),
      node: Number(node),
      core: Number(core),
      counter: Number(counter),
    };
  }

  compose(time, node, core, counter) {
    let nodeField;
    let sequenceField;
    if (this.coreFrom === 'sequence') {
      nodeField = BigInt(node);
      sequenceField = (BigInt(core) << BigInt(this.counterBits)) | BigInt(counter);
    } else {
      nodeField = (BigInt(node) << BigInt(this.coreBits)) | BigInt(core);
      sequenceField = BigInt(counter);
    }
    return (
      (BigInt(time) << BigInt(this.nodeBits + this.sequenceBits)) | (nodeField << BigInt(this.sequenceBits)) | sequenceField
    );
  }

  /**
   * Throws FlurryError invalid_argument unless the layout passes proto::validate for `nodeId`
   * at `nowUnixMs` (default: the epoch, which skips the clock checks).
   */
  validate({ nodeId = 0, nowUnixMs = this.epochMs } = {}) {
    const now = toBigIntMs(nowUnixMs, 'nowUnixMs');
    const fail = (message) => {
      throw new FlurryError('invalid_argument', message);
    };
    if (this.timeBits === 0 || this.sequenceBits === 0 || this.timeBits > 50 || this.nodeBits > 16 || this.sequenceBits > 31) {
      fail('layout widths must be time 1..50, node 0..16, sequence 1..31 bits');
    }
    if (this.idBits > ID_BITS_MAX) {
      fail(`layout widths sum to ${this.idBits} bits; time + node + sequence must be at most 63 so IDs stay positive`);
    }
    if (this.timeUnitMs !== 1 && this.timeUnitMs !== 10 && this.timeUnitMs !== 1000) {
      fail(`time unit ${this.timeUnitMs} ms is not allowed; use 1, 10 or 1000`);
    }
    if (this.coreBits > 31) fail(`${this.coreBits} core bits are more than 31; use fewer workers`);
    const fromSequence = this.coreFrom === 'sequence';
    const sourceBits = fromSequence ? this.sequenceBits : this.nodeBits;
    const room = fromSequence ? sourceBits - 1 : sourceBits;
    if (this.coreBits > room) {
      fail(
        `the ${2 ** this.coreBits} workers need ${this.coreBits} core bits but the ${fromSequence ? 'sequence' : 'node'} ` +
          `field has ${sourceBits}; use fewer workers or a wider field`,
      );
    }
    const rangeMs = (this.timeMax + 1n) * BigInt(this.timeUnitMs);
    if (rangeMs < TIME_RANGE_MIN_MS) {
      fail(
        `a ${this.timeBits}-bit time field of ${this.timeUnitMs} ms units covers ${rangeMs / 86400000n / 365n} years; ` +
          'at least 30 are required (widen the time field or use a coarser unit)',
      );
    }
    if (this.epochMs > now) fail(`epoch ${formatUnixMs(this.epochMs)} is in the future; pick an epoch in the past`);
    if (this.endUnixMs <= now) {
      fail(`layout ran out at ${formatUnixMs(this.endUnixMs)}; pick a later epoch or a wider time field`);
    }
    const nodeIdMax = 2 ** this.nodeIdBits - 1;
    if (nodeId > nodeIdMax) {
      fail(`node id ${nodeId} does not fit the layout's ${this.nodeIdBits} node bits (largest is ${nodeIdMax})`);
    }
  }
}

// ---- the proleptic Gregorian calendar in UTC (days since 1970-01-01), for any year a layout
// reaches: JavaScript's Date stops at the year 275760, a 50-bit field of seconds does not.

/** [year, month 1..12, day 1..31] of a day number (H. Hinnant's civil_from_days). */
export function civilFromDays(days) {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return [yoe + era * 400 + (month <= 2 ? 1 : 0), month, day];
}

/** The day number of a date (days_from_civil); the date must be a real one. */
export function daysFromCivil(year, month, day) {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

export function daysInMonth(year, month) {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** UTC fields of Unix milliseconds (bigint, >= 0): {year, month, day, hour, minute, second, ms}. */
export function utcFields(unixMs) {
  const seconds = unixMs / 1000n;
  const days = Number(seconds / 86400n);
  const inDay = Number(seconds % 86400n);
  const [year, month, day] = civilFromDays(days);
  return {
    year,
    month,
    day,
    hour: Math.floor(inDay / 3600),
    minute: Math.floor((inDay % 3600) / 60),
    second: inDay % 60,
    ms: Number(unixMs % 1000n),
  };
}

function pad(value, width) {
  return String(value).padStart(width, '0');
}

/** ISO-8601 UTC, e.g. "2024-01-01T00:00:00.000Z" (proto::format_unix_ms). */
export function formatUnixMs(unixMs) {
  const t = utcFields(BigInt(unixMs));
  return `${pad(t.year, 4)}-${pad(t.month, 2)}-${pad(t.day, 2)}T${pad(t.hour, 2)}:${pad(t.minute, 2)}:${pad(t.second, 2)}.${pad(t.ms, 3)}Z`;
}
