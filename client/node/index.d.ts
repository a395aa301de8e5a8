// client/node/index.d.ts — the types of @flurry/client, written by hand to match index.js
// exactly: test/lint.test.js checks that every runtime export (and every method of every
// exported class, and every member of `wire`) is declared here and that nothing here is missing
// at run time. IDs are bigint; the *String methods return decimal strings.

/** Every `code` a FlurryError carries. */
export type ErrorCode =
  | 'invalid_argument'
  | 'resolve_failed'
  | 'system'
  | 'no_answer'
  | 'fenced'
  | 'draining'
  | 'retry_exhausted'
  | 'bad_request'
  | 'unauthorized'
  | 'unknown_sequence'
  | 'not_owner'
  | 'exhausted'
  | 'closed';

export declare const ERROR_CODES: readonly ErrorCode[];

/** The one error every call rejects (or throws) with. */
export declare class FlurryError extends Error {
  constructor(code: ErrorCode, message: string, extra?: { reason?: string; detail?: number; cause?: unknown });
  name: 'FlurryError';
  readonly code: ErrorCode;
  /** BAD_REQUEST / UNAUTHORIZED: the server's RequestError name, e.g. 'auth_required'. */
  readonly reason?: string;
  /** BAD_REQUEST / UNAUTHORIZED: the RequestError number. */
  readonly detail?: number;
}

/** A signing key (PROTOCOL.md "Authentication"). */
export interface Key {
  /** The key id of the server's key file, 1..4294967295. */
  id: number;
  /** 16 bytes, or 32 hex digits. */
  secret: Uint8Array | string;
}

/** A key as the client keeps it. */
export interface ResolvedKey {
  readonly id: number;
  readonly secret: Uint8Array;
}

export interface ClientOptions {
  /** "HOST:PORT" each (IPv4 or a name resolved once), tried in order; 1..64. Default ["127.0.0.1:7420"]. */
  servers?: readonly string[];
  /** How long one attempt waits for its answer, 1..60000. Default 100. */
  timeoutMs?: number;
  /** Attempts per call; a timeout, failed send, FENCED or NOT_OWNER uses one, 1..100. Default 5. */
  attempts?: number;
  /** The most IDs asked in one request, 1..2^20. Default 4096. */
  idsPerRequest?: number;
  /** IDs one range is assumed to hold, for the request padding, 1..2^31. Default 256. */
  idsPerRange?: number;
  /** 0 (off) or 2..2^24: a local buffer of this many IDs refilled in the background. Default 0. */
  prefetch?: number;
  /** The longest single wait after RETRY, 1..10000. Default 100. */
  retryWaitMaxMs?: number;
  /** The most time one call spends waiting on RETRY (and a sequence owner move), 0..600000. Default 2000. */
  retryBudgetMs?: number;
  /** Sign every request and accept only answers whose MAC verifies. */
  key?: Key;
}

export interface ResolvedOptions {
  readonly servers: readonly string[];
  readonly timeoutMs: number;
  readonly attempts: number;
  readonly idsPerRequest: number;
  readonly idsPerRange: number;
  readonly prefetch: number;
  readonly retryWaitMaxMs: number;
  readonly retryBudgetMs: number;
  readonly key: ResolvedKey | undefined;
}

export declare const DEFAULT_SERVER: string;
export declare const DEFAULT_OPTIONS: ResolvedOptions;
export declare const LIMITS: {
  readonly serversMax: number;
  readonly timeoutMsMin: number;
  readonly timeoutMsMax: number;
  readonly attemptsMax: number;
  readonly idsPerRangeMax: number;
  readonly prefetchMin: number;
  readonly prefetchMax: number;
  readonly retryWaitMaxMsMax: number;
  readonly retryBudgetMsMax: number;
  readonly getCountMax: number;
  readonly seqPrefetchNamesMax: number;
};

/** `count` consecutive IDs: first, first + 1, ..., first + count - 1. */
export interface IdRange {
  first: bigint;
  count: number;
}

export interface PingResult {
  /** Send to receipt of the accepted answer, in milliseconds. */
  rttMs: number;
  /** "HOST:PORT" as given in the options. */
  server: string;
  /** The answering server's node id. */
  node: number;
}

/** The INFO body (PROTOCOL.md), and who answered. */
export interface Info {
  epochMs: bigint;
  timeUnitMs: number;
  timeBits: number;
  nodeBits: number;
  sequenceBits: number;
  coreBits: number;
  /** 0: core bits are the top of the sequence field; 1: the bottom of the node field. */
  coreFrom: number;
  workers: number;
}

export interface ServerInfo extends Info {
  server: string;
  node: number;
}

/** Monotonic since construction. */
export interface Counters {
  requests: number;
  responses: number;
  retries: number;
  timeouts: number;
  fenced: number;
  ignoredResponses: number;
  malformedResponses: number;
  sendErrors: number;
  unverifiedResponses: number;
  idsReceived: number;
  prefetchRefills: number;
  prefetchFailures: number;
}

/**
 * The flurry UDP client. One request is outstanding at a time; calls queue. Every rejection is a
 * FlurryError.
 */
export declare class Client {
  /** Throws FlurryError invalid_argument for an option out of bounds. Sends nothing (but prefetch). */
  constructor(options?: ClientOptions);
  readonly options: ResolvedOptions;
  readonly closed: boolean;
  /** Exactly n unique IDs, in issue order (0 <= n <= 2^26). */
  get(n: number): Promise<bigint[]>;
  getStrings(n: number): Promise<string[]>;
  getRanges(n: number): Promise<IdRange[]>;
  /** One ID: from the prefetch buffer when on. */
  next(): Promise<bigint>;
  nextString(): Promise<string>;
  /** Exactly n numbers of the named sequence (GET_SEQ; name: 1..32 of A-Z a-z 0-9 _ . - :). */
  getSeq(name: string, n: number): Promise<bigint[]>;
  getSeqStrings(name: string, n: number): Promise<string[]>;
  getSeqRanges(name: string, n: number): Promise<IdRange[]>;
  nextSeq(name: string): Promise<bigint>;
  nextSeqString(name: string): Promise<string>;
  ping(): Promise<PingResult>;
  info(): Promise<ServerInfo>;
  counters(): Counters;
  /** Ends every call in flight and later (FlurryError closed); resolves once the sockets are closed. */
  close(): Promise<void>;
}

/** A client key file (TOML: id, secret, name; mode 0600 or stricter). */
export declare function readKeyFile(path: string): Promise<ResolvedKey>;

// ---- the layout ----

export declare const DEFAULT_EPOCH_MS: bigint;

export interface LayoutFields {
  timeBits?: number;
  nodeBits?: number;
  sequenceBits?: number;
  coreBits?: number;
  coreFrom?: 'sequence' | 'node' | 0 | 1;
  epochMs?: bigint | number | string;
  timeUnitMs?: number;
}

export interface DecodedId {
  /** The time field: units since the epoch. */
  time: bigint;
  unixMs: bigint;
  node: number;
  core: number;
  counter: number;
}

export declare class Layout {
  constructor(fields?: LayoutFields);
  static preset(name: 'snowflake' | 'js-safe'): Layout;
  /** Not validated: call validate() before trusting a server's INFO. */
  static fromInfo(info: Info): Layout;
  readonly timeBits: number;
  readonly nodeBits: number;
  readonly sequenceBits: number;
  readonly coreBits: number;
  readonly coreFrom: 'sequence' | 'node';
  readonly epochMs: bigint;
  readonly timeUnitMs: number;
  readonly timeMax: bigint;
  readonly nodeIdBits: number;
  readonly counterBits: number;
  readonly counterCapacity: number;
  readonly idBits: number;
  readonly endUnixMs: bigint;
  fits(id: bigint | number | string): boolean;
  decode(id: bigint | number | string): DecodedId;
  compose(time: bigint | number, node: bigint | number, core: bigint | number, counter: bigint | number): bigint;
  /** Throws FlurryError invalid_argument unless the layout is valid for nodeId at nowUnixMs. */
  validate(options?: { nodeId?: number; nowUnixMs?: bigint | number | string }): void;
}

/** ISO-8601 UTC, e.g. "2024-01-01T00:00:00.000Z". */
export declare function formatUnixMs(unixMs: bigint | number): string;

// ---- the ID forms ----

export type Form = 'dec' | 'hex' | 'readable' | 'base32' | 'opaque' | 'uuid';
/** An ID: a bigint, a safe whole number or a decimal string, below 2^63. */
export type IdLike = bigint | number | string;

export declare const FORMS: readonly Form[];
export declare const ID_MAX: bigint;

export declare function toId(value: IdLike): bigint;
export declare function formatDec(id: IdLike): string;
export declare function parseDec(text: string): bigint;
export declare function formatHex(id: IdLike): string;
export declare function parseHex(text: string): bigint;
export declare function formatBase32(value: IdLike): string;
export declare function parseBase32(text: string): bigint;
export declare function formatUuid(layout: Layout, id: IdLike): string;
export declare function parseUuid(layout: Layout, text: string): bigint;

export interface Readable {
  id: bigint;
  tag: string;
}

export declare class ReadableForm {
  constructor(layout: Layout);
  readonly layout: Layout;
  readonly yearDigits: number;
  readonly fractionDigits: number;
  readonly restBits: number;
  readonly restDigits: number;
  readonly timeDigits: number;
  size(tagSize?: number): number;
  format(id: IdLike, tag?: string): string;
  parse(text: string): Readable;
}

export declare class OpaqueKey {
  constructor(id: string, secret: Uint8Array | string);
  readonly id: string;
  encrypt(x: IdLike): bigint;
  decrypt(y: IdLike): bigint;
  hasId(id: string): boolean;
  format(id: IdLike): string;
  parse(text: string): bigint;
}

export declare function opaqueKeyId(text: string): string;

export declare class KeyRing {
  constructor(keys: ReadonlyArray<OpaqueKey | { id: string; secret: Uint8Array | string }>, current?: string);
  static parse(tomlText: string, source?: string): KeyRing;
  static load(path: string): Promise<KeyRing>;
  readonly keys: readonly OpaqueKey[];
  readonly current: OpaqueKey;
  find(id: string): OpaqueKey | null;
  encode(id: IdLike): string;
  decode(text: string): bigint;
}

export interface FormOptions {
  /** readable and uuid */
  layout?: Layout;
  /** readable only: 0..4 chars of A-Z 0-9 */
  tag?: string;
  /** opaque */
  keys?: KeyRing;
}

export interface ParsedId {
  form: Form;
  id: bigint;
  /** readable's tag; '' for the other forms */
  tag: string;
  /** opaque: the key id as written */
  keyId?: string;
}

export declare function formatId(form: Form, id: IdLike, options?: FormOptions): string;
export declare function parseId(form: Form, text: string, options?: FormOptions): ParsedId;
export declare function parseAnyId(text: string, options?: FormOptions): ParsedId;

// ---- the rest ----

/** SipHash-2-4 of data under a 16-byte key: 8 bytes, as libsodium's crypto_shorthash writes them. */
export declare function siphash24(key: Uint8Array, data: Uint8Array): Uint8Array;

/** The client's version: the project's (VERSION at the repository root). */
export declare const VERSION: string;

/** The bytes of the wire protocol (proto/PROTOCOL.md), for tools and tests. */
export declare namespace wire {
  const MAGIC: number;
  const WIRE_VERSION: number;
  const REQUEST_HEADER_SIZE: number;
  const RESPONSE_HEADER_SIZE: number;
  const RANGE_SIZE: number;
  const INFO_BODY_SIZE: number;
  const DATAGRAM_SIZE_MAX: number;
  const AMPLIFICATION_MAX: number;
  const COUNT_MAX: number;
  const SEQ_NAME_SIZE_MAX: number;
  const OPCODE_RESPONSE_BIT: number;
  const FLAG_AUTH: number;
  const AUTH_TRAILER_SIZE: number;
  const ANSWER_MAC_SIZE: number;
  const SIGNED_REQUEST_SIZE_MIN: number;
  const ANY_SERVER: number;
  const NOT_OWNER_UNKNOWN: number;
  const FENCED_LOST: number;
  const FENCED_DRAINING: number;
  const ID_LIMIT: bigint;
  const STALE_TIMESTAMP: number;
  const WRONG_SERVER: number;
  const Opcode: { readonly GET_IDS: 1; readonly PING: 2; readonly INFO: 3; readonly GET_SEQ: 4 };
  const Status: {
    readonly OK: 0;
    readonly RETRY: 1;
    readonly BAD_REQUEST: 2;
    readonly UNAUTHORIZED: 3;
    readonly FENCED: 4;
    readonly UNKNOWN_SEQUENCE: 5;
    readonly NOT_OWNER: 6;
    readonly EXHAUSTED: 7;
  };
  const REQUEST_ERRORS: Readonly<Record<number, string>>;

  interface Request {
    opcode: number;
    flags?: number;
    count: number;
    requestId: bigint;
    /** GET_SEQ only */
    name?: string;
  }
  interface ResponseHeader {
    /** without the response bit */
    opcode: number;
    status: number;
    rangeCount: number;
    node: number;
    requestId: bigint;
    detail: number;
  }
  type ResponseError =
    | 'ok'
    | 'too_short'
    | 'bad_magic'
    | 'too_long'
    | 'bad_version'
    | 'not_response'
    | 'bad_status'
    | 'bad_opcode'
    | 'status_unexpected'
    | 'ranges_unexpected'
    | 'ranges_missing'
    | 'bad_length'
    | 'bad_range';
  interface DecodedResponse {
    error: ResponseError;
    header: ResponseHeader | null;
    ranges: IdRange[];
    info: Info | null;
  }

  function opcodeName(opcode: number): string;
  function statusName(status: number): string;
  function requestErrorName(number: number): string;
  function validSeqName(name: string): boolean;
  function responseSizeMax(requestSize: number): number;
  function rangesMax(requestSize: number): number;
  function requestSizeForRanges(ranges: number): number;
  function rangesForIds(count: number, idsPerRange: number): number;
  function requestSizeForIds(count: number, idsPerRange: number): number;
  function encodeRequest(request: Request, paddedSize?: number): Uint8Array;
  function encodeSignedRequest(
    request: Request,
    size: number,
    key: { id: number; secret: Uint8Array },
    server: number,
    timestampUs: bigint,
  ): Uint8Array;
  function requestMac(signedRequest: Uint8Array): Uint8Array;
  function signAnswer(answer: Uint8Array, requestMacBytes: Uint8Array, secret: Uint8Array): Uint8Array;
  function verifyAnswer(answer: Uint8Array, requestMacBytes: Uint8Array, secret: Uint8Array): boolean;
  function decodeResponse(datagram: Uint8Array): DecodedResponse;
  function encodeResponse(
    header: Omit<ResponseHeader, 'rangeCount' | 'detail'> & { rangeCount?: number; detail?: number },
    body?: { ranges?: readonly IdRange[]; info?: Info | null },
  ): Uint8Array;
}
