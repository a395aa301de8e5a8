// client/node/test/protocol_vectors.js — reads the test vectors of proto/PROTOCOL.md at run
// time (FLURRY_PROTOCOL_MD, default ../../proto/PROTOCOL.md from the client's directory).
//
// Contract: loadVectors() returns {vectors: Map(name -> vector), declared}, where a vector is
// {name, kind, bytes: Buffer (every hex: line concatenated), ranges: [{first, count}], seqName
// (a GET_SEQ vector's `name:` line), and every other `key: value` line as a string}; `fields:`, `layout:`, `info:`, `key:` and `trailer:`
// lines are also parsed into objects of bigint values (parseFields). `declared` is the count in
// the closing "<!-- N vectors -->" comment. Throws when the file is missing or a block is
// malformed, so a broken document fails the test instead of passing vacuously.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const clientDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function protocolPath() {
  return process.env.FLURRY_PROTOCOL_MD || path.resolve(clientDir, '../../proto/PROTOCOL.md');
}

/** "a=1 b=0x2 c=text" into {a: 1n, b: 2n, c: 'text'} (numbers as bigint). */
export function parseFields(text) {
  const fields = {};
  for (const pair of text.trim().split(/\s+/)) {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`malformed field '${pair}'`);
    const value = pair.slice(at + 1);
    fields[pair.slice(0, at)] = /^(0x[0-9a-fA-F]+|[0-9]+)$/.test(value) ? BigInt(value) : value;
  }
  return fields;
}

export function loadVectors(file = protocolPath()) {
  const text = readFileSync(file, 'utf8');
  const vectors = new Map();
  const blocks = text.split('```');
  // Odd pieces are inside fences.
  for (let i = 1; i < blocks.length; i += 2) {
    const lines = blocks[i].split('\n').filter((line) => line.trim() !== '');
    if (lines.length === 0 || !lines[0].startsWith('vector: ')) continue;
    const vector = { name: lines[0].slice('vector: '.length).trim(), hex: '', ranges: [] };
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon < 1) throw new Error(`vector ${vector.name}: malformed line '${line}'`);
      const key = line.slice(0, colon);
      const value = line.slice(colon + 1).trim();
      if (key === 'hex') vector.hex += value.replace(/\s+/g, '');
      else if (key === 'range') vector.ranges.push(parseFields(value));
      else if (key === 'note') continue;
      else if (key === 'name') vector.seqName = value; // GET_SEQ's name (the block's is `vector:`)
      else if (vector[key] !== undefined) throw new Error(`vector ${vector.name}: '${key}' twice`);
      else vector[key] = value;
    }
    if (vectors.has(vector.name)) throw new Error(`vector ${vector.name} twice`);
    vector.bytes = Buffer.from(vector.hex, 'hex');
    if (vector.size !== undefined && Number(vector.size) !== vector.bytes.length && vector.kind !== 'server') {
      throw new Error(`vector ${vector.name}: size ${vector.size} but ${vector.bytes.length} bytes`);
    }
    for (const key of ['fields', 'layout', 'info', 'key', 'trailer']) {
      if (vector[key] !== undefined) vector[`${key}Parsed`] = parseFields(vector[key]);
    }
    vectors.set(vector.name, vector);
  }
  const declared = /<!--\s*(\d+) vectors\s*-->/.exec(text);
  return { vectors, declared: declared ? Number(declared[1]) : null };
}
