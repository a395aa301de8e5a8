// client/node/lib/errors.js — the one error type every call of this client rejects (or
// throws) with: FlurryError, an Error with a `code` a program can switch on and a message a
// person can act on (what failed, where, and the fix when known).
//
// Codes (the C++ client's ErrorCode, client/client.h, in snake_case):
//   invalid_argument  bad options, a malformed "HOST:PORT", a count or name out of bounds, an
//                     ID or text a form cannot read
//   resolve_failed    a server's HOST has no IPv4 address
//   system            a socket could not be opened or connected
//   no_answer         every attempt timed out (or could not be sent)
//   fenced            attempts ran out and a server answered FENCED (it holds no node id)
//   draining          attempts ran out and every FENCED server was draining (its operator is
//                     stopping it: a planned move)
//   retry_exhausted   a server kept answering RETRY for longer than the retry budget
//   bad_request       the server answered BAD_REQUEST (`reason` names the RequestError)
//   unauthorized      the server answered UNAUTHORIZED (`reason` names the RequestError)
//   unknown_sequence  GET_SEQ: no sequence of that name on the server
//   not_owner         GET_SEQ: a monotonic sequence served by a node none of the servers is
//   exhausted         EXHAUSTED: the layout's time (or the sequence's numbers) ran out; no
//                     server will ever issue them again
//   closed            the client was closed (before or during the call)

export const ERROR_CODES = Object.freeze([
  'invalid_argument',
  'resolve_failed',
  'system',
  'no_answer',
  'fenced',
  'draining',
  'retry_exhausted',
  'bad_request',
  'unauthorized',
  'unknown_sequence',
  'not_owner',
  'exhausted',
  'closed',
]);

export class FlurryError extends Error {
  /**
   * @param {string} code one of ERROR_CODES
   * @param {string} message one sentence for a person
   * @param {{reason?: string, detail?: number, cause?: unknown}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'FlurryError';
    this.code = code;
    // BAD_REQUEST / UNAUTHORIZED: the server's RequestError name and number.
    if (extra.reason !== undefined) this.reason = extra.reason;
    if (extra.detail !== undefined) this.detail = extra.detail;
  }
}

export function invalidArgument(message) {
  return new FlurryError('invalid_argument', message);
}
