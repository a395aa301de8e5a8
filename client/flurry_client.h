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

/* Writes exactly n unique IDs to out[0..n) (n == 0 succeeds at once). On failure out's
 * contents are unspecified and no ID in it may be used.
 * Errors: FLURRY_ERR_INVALID_ARGUMENT, FLURRY_ERR_NO_ANSWER, FLURRY_ERR_FENCED,
 *         FLURRY_ERR_RETRY_EXHAUSTED, FLURRY_ERR_BAD_REQUEST, FLURRY_ERR_UNAUTHORIZED,
 *         FLURRY_ERR_NO_MEMORY. */
int flurry_client_get(flurry_client* client, uint64_t* out, size_t n, char* err, size_t err_len);

/* Writes exactly n numbers of the named sequence `name` (NUL-terminated, 1..32 characters
 * from A-Z a-z 0-9 _ . -) to out[0..n). On failure no number in out may be used.
 * Errors: those of flurry_client_get, FLURRY_ERR_UNKNOWN_SEQUENCE, FLURRY_ERR_NOT_OWNER. */
int flurry_client_get_seq(flurry_client* client, const char* name, uint64_t* out, size_t n, char* err,
                          size_t err_len);

/* Writes one ID to *out: from the prefetch buffer when prefetch is on (usually no network
 * round trip), otherwise with one request.
 * Errors: as flurry_client_get. */
int flurry_client_next(flurry_client* client, uint64_t* out, char* err, size_t err_len);

/* Stops the prefetch thread (interrupting a request in flight), closes the socket, frees the
 * client. NULL is allowed. Never fails. */
void flurry_client_destroy(flurry_client* client);

/* A static, NUL-terminated name for an error code ("ok", "no_answer", ...); "unknown" for a
 * code not listed above. Never fails. */
const char* flurry_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* FLURRY_CLIENT_H */
