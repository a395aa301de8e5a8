// client/node/lib/keys.js — the signing key of a client (PROTOCOL.md "Authentication"): its
// shape, and the key file the C++ client's `flurry get --key-file` reads.
//
// A client key file is TOML, mode 0600 or stricter:
//   id = 7                                        # the key id of the server's key file
//   secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
//   name = "billing"                              # optional, for people
// Anything else is refused, so a misspelt field is not silently ignored.
//
// Contract: normalizeKey() and readKeyFile() return a frozen {id, secret: Uint8Array(16)} or
// fail with FlurryError invalid_argument naming the file (and line) and the fix, never the
// secret. The secret is not enumerable: console.log, util.inspect and JSON.stringify of a key
// (or of a client's options) show its id only, e.g. Key(id=7). readSecretFile() is the shared, checked read of a file holding secrets (forms.js
// KeyRing.load uses it too).

import { promises as fs } from 'node:fs';
import { inspect } from 'node:util';

import { FlurryError, invalidArgument } from './errors.js';
import { parseToml } from './toml.js';

export const KEY_FILE_SIZE_MAX = 64 * 1024;

/** 32 hex digits into 16 bytes, or null. */
export function secretFromHex(hex) {
  if (typeof hex !== 'string' || !/^[0-9A-Fa-f]{32}$/.test(hex)) return null;
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}

/**
 * A key as given in options: {id: 1..2^32-1, secret: 16 bytes (Uint8Array) or 32 hex digits}.
 * Returns a frozen copy; throws FlurryError invalid_argument.
 */
export function normalizeKey(key) {
  if (key === null || typeof key !== 'object') throw invalidArgument('key must be {id, secret}');
  if (!Number.isInteger(key.id) || key.id < 1 || key.id > 0xffffffff) {
    throw invalidArgument('key id must be a whole number in 1..4294967295');
  }
  let secret = null;
  if (typeof key.secret === 'string') secret = secretFromHex(key.secret);
  else if (key.secret instanceof Uint8Array && key.secret.length === 16) secret = Uint8Array.from(key.secret);
  if (secret === null) throw invalidArgument('key secret must be 16 bytes (a Uint8Array) or 32 hex digits');
  return makeKey(key.id, secret);
}

// {id, secret} with the secret kept out of logs (see the contract).
function makeKey(id, secret) {
  const key = { id };
  Object.defineProperty(key, 'secret', { value: secret, enumerable: false });
  Object.defineProperty(key, inspect.custom, { value: () => `Key(id=${id})`, enumerable: false });
  return Object.freeze(key);
}

/**
 * The text of a file of secrets, after checking it is a regular file of at most 64 KiB that
 * neither group nor others may read or write. Throws FlurryError invalid_argument.
 */
export async function readSecretFile(path) {
  let handle;
  try {
    handle = await fs.open(path, 'r');
  } catch (error) {
    throw new FlurryError('invalid_argument', `key file ${path}: ${error.message}`, { cause: error });
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw invalidArgument(`key file ${path}: not a regular file`);
    if ((info.mode & 0o077) !== 0) {
      const mode = (info.mode & 0o7777).toString(8).padStart(4, '0');
      throw invalidArgument(
        `key file ${path} has mode ${mode}: group or others may read or write it; ` +
          `a key file must be mode 0600 or stricter (chmod 600 ${path})`,
      );
    }
    if (info.size > KEY_FILE_SIZE_MAX) throw invalidArgument(`key file ${path}: larger than 64 KiB: not a key file`);
    return await handle.readFile({ encoding: 'utf8' });
  } finally {
    await handle.close();
  }
}

/** Parses TOML, turning a syntax error into FlurryError invalid_argument. */
export function parseKeyToml(text, source) {
  try {
    return parseToml(text, source);
  } catch (error) {
    throw new FlurryError('invalid_argument', `key file ${error.message}`);
  }
}

/** Reads a client key file (above). Resolves to {id, secret}; rejects FlurryError invalid_argument. */
export async function readKeyFile(path) {
  const table = parseKeyToml(await readSecretFile(path), path);
  for (const name of Object.keys(table)) {
    if (name !== 'id' && name !== 'secret' && name !== 'name') {
      throw invalidArgument(`key file ${path}: unknown key '${name}' (expected id, secret, name)`);
    }
  }
  if (table.id === undefined || typeof table.secret !== 'string') {
    throw invalidArgument(`key file ${path}: needs id = N and secret = "32 hex digits"`);
  }
  if (typeof table.id !== 'number' || !Number.isInteger(table.id) || table.id < 1 || table.id > 0xffffffff) {
    throw invalidArgument(`key file ${path}: id must be a whole number in 1..4294967295`);
  }
  const secret = secretFromHex(table.secret);
  if (secret === null) throw invalidArgument(`key file ${path}: secret must be "32 hex digits" (16 bytes)`);
  return makeKey(table.id, secret);
}
