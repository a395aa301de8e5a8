// client/node/index.js — the package's one entry point (@flurry/client): everything a program
// uses, re-exported from lib/. index.d.ts declares exactly these exports (test/lint.test.js
// checks both ways).
//
//   Client, FlurryError           the UDP client and its error (lib/client.js, lib/errors.js)
//   readKeyFile                   a signing key from a client key file (lib/keys.js)
//   Layout, formatUnixMs          decoding IDs (lib/layout.js)
//   formatId, parseId, ...        the ID forms (lib/forms.js)
//   wire                          the protocol's bytes, for tools and tests (lib/wire.js)
//   siphash24                     SipHash-2-4 (lib/siphash.js)
//   VERSION                       the client's version, the project's

export { Client, DEFAULT_OPTIONS, DEFAULT_SERVER, LIMITS } from './lib/client.js';
export { ERROR_CODES, FlurryError } from './lib/errors.js';
export { readKeyFile } from './lib/keys.js';
export { DEFAULT_EPOCH_MS, Layout, formatUnixMs } from './lib/layout.js';
export {
  FORMS,
  ID_MAX,
  KeyRing,
  OpaqueKey,
  ReadableForm,
  formatBase32,
  formatDec,
  formatHex,
  formatId,
  formatUuid,
  opaqueKeyId,
  parseAnyId,
  parseBase32,
  parseDec,
  parseHex,
  parseId,
  parseUuid,
  toId,
} from './lib/forms.js';
export { siphash24 } from './lib/siphash.js';
export { VERSION } from './lib/version.js';
export * as wire from './lib/wire.js';
