/* client/flurry_client.h — the C ABI of the flurry client library (plain C99).
 *
 * Contract: a thin wrapper over flurry::client::Client (client/client.h), which documents the
 * protocol behaviour (failover, RETRY, ignored and malformed answers). Every function
 * returns FLURRY_OK (0) or one of the negative FLURRY_ERR_* codes below; no C++ exception
 * crosses this boundary. Where a function takes `err` and `err_len`, a failure writes one
 * NUL-terminated sentence there (truncated to fit); `err` may be NULL or `err_len` 0.
 *
 * Thread safety: as the C++ Client. Any function may be called from any thread;
 * flurry_client_get calls are serialized inside the client (one socket, one outstanding
 * request). With prefetch on, flurry_client_next is safe and cheap from many threads.
 * flurry_client_destroy must not race with any other call on the same client.
 *
 * Link with `pkg-config --cflags --libs flurry-client`, include <client/flurry_client.h>.
 */
#ifndef FLURRY_CLIENT_H
#define FLURRY_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. */
#define FLURRY_OK 0
/* A NULL client or output pointer, a malformed server list, n above the per-call maximum
 * (2^26), or an option out of range. */
#define FLURRY_ERR_INVALID_ARGUMENT (-1)
/* A server name has no IPv4 address (flurry_client_create only). */
#define FLURRY_ERR_RESOLVE (-2)
/* socket(), eventfd() or thread creation failed (flurry_client_create only). */
#define FLURRY_ERR_SYSTEM (-3)
/* Every attempt timed out: no server answered. */
#define FLURRY_ERR_NO_ANSWER (-4)
/* Attempts ran out and at least one server answered FENCED (lost its node id). */
#define FLURRY_ERR_FENCED (-5)
/* The server kept answering RETRY (its issue ceiling is not rising) beyond the budget. */
#define FLURRY_ERR_RETRY_EXHAUSTED (-6)
/* The server answered BAD_REQUEST; the message names the reason. */
#define FLURRY_ERR_BAD_REQUEST (-7)
/* The server answered UNAUTHORIZED. */
#define FLURRY_ERR_UNAUTHORIZED (-8)
/* Out of memory. */
#define FLURRY_ERR_NO_MEMORY (-9)
/* GET_SEQ: the server has no sequence of that name (create it with flurryctl seq create). */
#define FLURRY_ERR_UNKNOWN_SEQUENCE (-10)
/* GET_SEQ: a monotonic sequence another node serves; the message names it. */
#define FLURRY_ERR_NOT_OWNER (-11)
/* Every server that answered FENCED was draining: its operator is stopping it (a planned move). */
#define FLURRY_ERR_DRAINING (-12)
/* EXHAUSTED: the ID layout's time or the sequence's numbers have run out; never again. */
#define FLURRY_ERR_EXHAUSTED (-13)

/* ID forms (flurry_id_format, flurry_id_parse; -20..-29 are theirs): */
/* The text is not an ID in the form asked (or in any form), a tag is not 0..4 of [A-Z0-9], or
 * the ID does not fit the layout; the message says which. */
#define FLURRY_ERR_MALFORMED (-20)
/* The output buffer is too small; FLURRY_FORM_TEXT_MAX always suffices. */
#define FLURRY_ERR_BUFFER_TOO_SMALL (-21)
/* A key file was refused: unreadable, mode not 0600 or stricter, or malformed. */
#define FLURRY_ERR_KEY_FILE (-22)

/* An opaque client: one UDP socket, its server list and, with prefetch on, a background
 * refill thread. */
typedef struct flurry_client flurry_client;

/* Creates a client.
 *   servers_csv: "HOST:PORT[,HOST:PORT...]" (IPv4 addresses or names, resolved now); NULL or
 *                "" means "127.0.0.1:7420". Servers are tried in order; a timeout or a FENCED
 *                answer moves to the next one (5 attempts per request).
 *   timeout_ms:  per attempt, 1..60000; 0 means the default, 100.
 *   prefetch:    0 turns prefetch off; otherwise 2..16777216, the size of the local buffer
 *                that flurry_client_next draws from.
 * Returns NULL on failure with the reason in err. Sends nothing: succeeds whether or not a
 * server is up.
 * Errors: FLURRY_ERR_INVALID_ARGUMENT, FLURRY_ERR_RESOLVE, FLURRY_ERR_SYSTEM,
 *         FLURRY_ERR_NO_MEMORY (reported in err only, since the result is a pointer). */
flurry_client* flurry_client_create(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                                    char* err, size_t err_len);

/* As flurry_client_create, and every request is signed with the key `key_id` and its 16-byte
 * `secret` (PROTOCOL.md "Authentication"); only answers whose MAC verifies are accepted.
 * Errors: as flurry_client_create; FLURRY_ERR_INVALID_ARGUMENT for key_id 0 or secret NULL. */
flurry_client* flurry_client_create_signed(const char* servers_csv, uint32_t timeout_ms, uint32_t prefetch,
                                           uint32_t key_id, const uint8_t* secret, char* err, size_t err_len);
/* As flurry_client_create_signed with the key read from a client key file (`id = N`,
 * `secret = "32 hex digits"`, mode 0600 or stricter).
 * Errors: as flurry_client_create; FLURRY_ERR_INVALID_ARGUMENT for an unreadable or bad file. */
flurry_client* flurry_client_create_with_key_file(const char* servers_csv, uint32_t timeout_ms,
                                                  uint32_t prefetch, const char* key_file, char* err,
                                                  size_t err_len);
/* Everything flurry_client_create* takes, and what only this form offers. Zero-initialise it
 * ({0} or memset) and set what you need: zero fields mean the defaults. */
typedef struct flurry_client_options {
  const char* servers_csv; /* as flurry_client_create; NULL or "": "127.0.0.1:7420" */
  uint32_t timeout_ms;     /* per attempt, 1..60000; 0: 100 */
  uint32_t prefetch;       /* 0: off; otherwise 2..16777216 */
  /* 0: off. Otherwise a waiting call looks for its answer without sleeping for up to this many
   * microseconds (1..10000) before it blocks: no wakeup of the calling thread on the round
   * trip, for that thread's CPU while it waits. The prefetch thread never polls. */
  uint32_t poll_us;
  const char* key_file; /* NULL: unsigned; else as flurry_client_create_with_key_file */
} flurry_client_options;

/* Creates a client from `options` (not kept). Errors: as flurry_client_create;
 * FLURRY_ERR_INVALID_ARGUMENT for options NULL, poll_us above 10000 or a bad key file. */
flurry_client* flurry_client_create_with_options(const flurry_client_options* options, char* err,
                                                 size_t err_len);

/* Writes exactly n unique IDs to out[0..n) (n == 0 succeeds at once). On failure out's
 * contents are unspecified and no ID in it may be used.
 * Errors: FLURRY_ERR_INVALID_ARGUMENT, FLURRY_ERR_NO_ANSWER, FLURRY_ERR_FENCED,
 *         FLURRY_ERR_RETRY_EXHAUSTED, FLURRY_ERR_BAD_REQUEST, FLURRY_ERR_UNAUTHORIZED,
 *         FLURRY_ERR_NO_MEMORY. */
int flurry_client_get(flurry_client* client, uint64_t* out, size_t n, char* err, size_t err_len);

/* Writes exactly n numbers of the named sequence `name` (NUL-terminated, 1..32 characters
 * from A-Z a-z 0-9 _ . - :) to out[0..n). On failure no number in out may be used.
 * A monotonic sequence in cluster mode is asked of the node that owns it: a NOT_OWNER answer
 * sends the request to the server of the list that answered as the node it names (else the next
 * server); FLURRY_ERR_NOT_OWNER when no server of the list is the owner.
 * Errors: those of flurry_client_get, FLURRY_ERR_UNKNOWN_SEQUENCE, FLURRY_ERR_NOT_OWNER. */
int flurry_client_get_seq(flurry_client* client, const char* name, uint64_t* out, size_t n, char* err,
                          size_t err_len);

/* Writes one ID to *out: from the prefetch buffer when prefetch is on (usually no network
 * round trip), otherwise with one request.
 * Errors: as flurry_client_get. */
int flurry_client_next(flurry_client* client, uint64_t* out, char* err, size_t err_len);

/* Writes one number of the named sequence `name` to *out: with prefetch on, from a buffer of
 * that name (made on first use and refilled in the background like flurry_client_next's, at
 * most 16 names per client; numbers left in it at destroy are never used), otherwise with
 * one request.
 * Errors: as flurry_client_get_seq. */
int flurry_client_next_seq(flurry_client* client, const char* name, uint64_t* out, char* err, size_t err_len);

/* Stops the prefetch thread (interrupting a request in flight), closes the socket, frees the
 * client. NULL is allowed. Never fails. */
void flurry_client_destroy(flurry_client* client);

/* ---- ID forms (client/forms.h has the exact definitions; docs/forms.md) ----
 * dec "4194324487"; hex "0x00000000fa005007"; base32 "0000003X00M07" (Crockford, 13 chars,
 * sorts like the number); readable "240101000001000ORD0020487" (UTC time first, an optional
 * tag, the rest of the ID; needs the layout); opaque "k1_..." (a keyed permutation of the
 * 63-bit ID, named by key id; needs a key file). */
#define FLURRY_FORM_ANY (-1) /* flurry_id_parse only: whichever form reads the text */
#define FLURRY_FORM_DEC 0
#define FLURRY_FORM_HEX 1
#define FLURRY_FORM_READABLE 2
#define FLURRY_FORM_BASE32 3
#define FLURRY_FORM_OPAQUE 4
#define FLURRY_FORM_UUID 5 /* RFC 9562 version 7, needs the layout like READABLE */
/* Every form's text and its NUL fit in this many bytes. */
#define FLURRY_FORM_TEXT_MAX 64

/* An ID layout (proto/layout.h): widths in bits, where the core bits come from
 * (0 sequence, 1 node), the epoch in Unix ms and the time unit in ms (1, 10 or 1000). */
typedef struct flurry_layout {
  uint32_t time_bits;
  uint32_t node_bits;
  uint32_t sequence_bits;
  uint32_t core_bits;
  uint32_t core_from;
  uint32_t time_unit_ms;
  uint64_t epoch_ms;
} flurry_layout;

/* The default layout (snowflake: 41/10/12, 1 ms, epoch 2024-01-01). Never fails. */
void flurry_layout_default(flurry_layout* out);

/* The layout of the server (an INFO exchange), for the readable form.
 * Errors: FLURRY_ERR_INVALID_ARGUMENT, FLURRY_ERR_NO_ANSWER, FLURRY_ERR_BAD_REQUEST,
 *         FLURRY_ERR_UNAUTHORIZED, FLURRY_ERR_NO_MEMORY. */
int flurry_client_layout(flurry_client* client, flurry_layout* out, char* err, size_t err_len);

/* The keys of the opaque form, loaded from a TOML key file (client/form_keys.h: mode 0600 or
 * stricter, [[key]] tables with id and a 16-byte hex secret, `current` names the key that
 * encodes). Immutable; may be shared between threads. Returns NULL on failure.
 * Errors (in err only): FLURRY_ERR_KEY_FILE, FLURRY_ERR_INVALID_ARGUMENT (path NULL),
 *         FLURRY_ERR_NO_MEMORY. */
typedef struct flurry_keys flurry_keys;
flurry_keys* flurry_keys_load(const char* path, char* err, size_t err_len);
/* NULL is allowed. Wipes the secrets. Never fails. */
void flurry_keys_destroy(flurry_keys* keys);

/* Writes `id` in `form` (FLURRY_FORM_*) to out as NUL-terminated text. `layout` is needed by
 * the readable form (NULL otherwise), `tag` is the readable form's tag (NULL or "" for none;
 * refused with any other form), `keys` by the opaque form (its current key encodes).
 * Errors: FLURRY_ERR_INVALID_ARGUMENT (an unknown form, out NULL, a layout or keys missing or
 *         a layout that is not valid), FLURRY_ERR_MALFORMED (a bad tag, an ID of 2^63 or more
 *         or beyond the layout), FLURRY_ERR_BUFFER_TOO_SMALL. */
int flurry_id_format(int form, uint64_t id, const flurry_layout* layout, const char* tag,
                     const flurry_keys* keys, char* out, size_t out_len, char* err, size_t err_len);

/* Reads `text` in `form` (or FLURRY_FORM_ANY) into *id. `layout` lets the readable form be
 * read (NULL: not readable), `keys` the opaque one (NULL: not opaque). When `tag` is not NULL
 * it receives the readable form's tag, NUL-terminated (tag_len >= 5 always suffices; "" for
 * other forms); `form_out`, when not NULL, the form that was read.
 * Errors: FLURRY_ERR_INVALID_ARGUMENT (an unknown form, text or id NULL, a layout or keys that
 *         the form needs missing, a layout that is not valid), FLURRY_ERR_MALFORMED (the
 *         message says why; with FLURRY_FORM_ANY also when two forms read it),
 *         FLURRY_ERR_BUFFER_TOO_SMALL (tag_len). */
int flurry_id_parse(int form, const char* text, const flurry_layout* layout, const flurry_keys* keys,
                    uint64_t* id, int* form_out, char* tag, size_t tag_len, char* err, size_t err_len);

/* A static, NUL-terminated name for an error code ("ok", "no_answer", ...); "unknown" for a
 * code not listed above. Never fails. */
const char* flurry_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* FLURRY_CLIENT_H */
