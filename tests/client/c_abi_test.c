/* tests/client/c_abi_test.c — the C ABI (client/flurry_client.h), compiled as C, against the
 * in-process test server (real handler). Exits 0 when every check passes, 1 otherwise. */
#include "client/flurry_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/client/c_abi_server.h"

static int failures = 0;

#define CHECK(condition, ...)                                                       \
  do {                                                                              \
    if (!(condition)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #condition); \
      fprintf(stderr, __VA_ARGS__);                                                 \
      fputc('\n', stderr);                                                          \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

static int compare_u64(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a;
  const uint64_t y = *(const uint64_t*)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

static size_t count_duplicates(uint64_t* ids, size_t n) {
  size_t duplicates = 0;
  size_t i;
  qsort(ids, n, sizeof ids[0], compare_u64);
  for (i = 1; i < n; ++i) {
    if (ids[i] == ids[i - 1]) ++duplicates;
  }
  return duplicates;
}

#define IDS 10000

int main(void) {
  char err[256];
  char servers[64];
  static uint64_t ids[IDS + 100];
  flurry_client* client;
  int rc;
  size_t i;
  const uint16_t port = flurry_test_server_start();
  const uint16_t dead_port = flurry_test_dead_server_start();

  /* get() without prefetch. */
  snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)port);
  client = flurry_client_create(servers, 100, 0, err, sizeof err);
  CHECK(client != NULL, "create: %s", err);
  if (client == NULL) return 1;
  rc = flurry_client_get(client, ids, IDS, err, sizeof err);
  CHECK(rc == FLURRY_OK, "get: %d %s", rc, err);
  for (i = 0; i < 100; ++i) {
    rc = flurry_client_next(client, &ids[IDS + i], err, sizeof err);
    CHECK(rc == FLURRY_OK, "next: %d %s", rc, err);
  }
  CHECK(count_duplicates(ids, IDS + 100) == 0, "duplicate IDs");
  /* Node 3 in the default layout: bits 12..21. */
  CHECK(((ids[0] >> 12) & 0x3ff) == 3, "node of %llu", (unsigned long long)ids[0]);
  rc = flurry_client_get(client, ids, 0, err, sizeof err);
  CHECK(rc == FLURRY_OK, "get 0: %d", rc);
  rc = flurry_client_get(client, NULL, 5, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "get into NULL: %d", rc);
  /* GET_SEQ: this server holds no sequence; a bad name is refused before sending. */
  rc = flurry_client_get_seq(client, "orders", ids, 5, err, sizeof err);
  CHECK(rc == FLURRY_ERR_UNKNOWN_SEQUENCE, "get_seq of an unknown name: %d %s", rc, err);
  CHECK(strstr(err, "flurryctl seq create orders") != NULL, "message: %s", err);
  CHECK(strcmp(flurry_strerror(rc), "unknown_sequence") == 0, "strerror: %s", flurry_strerror(rc));
  CHECK(strcmp(flurry_strerror(FLURRY_ERR_NOT_OWNER), "not_owner") == 0, "strerror not_owner");
  rc = flurry_client_get_seq(client, "a/b", ids, 5, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "get_seq of a bad name: %d %s", rc, err);
  rc = flurry_client_get_seq(client, NULL, ids, 5, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "get_seq of NULL: %d", rc);
  flurry_client_destroy(client);

  /* next() with prefetch, a dead server first in the list. */
  snprintf(servers, sizeof servers, "127.0.0.1:%u, 127.0.0.1:%u", (unsigned)dead_port, (unsigned)port);
  client = flurry_client_create(servers, 20, 1000, err, sizeof err);
  CHECK(client != NULL, "create with prefetch: %s", err);
  if (client != NULL) {
    for (i = 0; i < 5000; ++i) {
      rc = flurry_client_next(client, &ids[i], err, sizeof err);
      CHECK(rc == FLURRY_OK, "next with prefetch: %d %s", rc, err);
      if (rc != FLURRY_OK) break;
    }
    CHECK(count_duplicates(ids, 5000) == 0, "duplicate IDs with prefetch");
    flurry_client_destroy(client);
  }

  /* Errors. */
  client = flurry_client_create("127.0.0.1", 100, 0, err, sizeof err);
  CHECK(client == NULL, "create accepted a server without a port");
  CHECK(strstr(err, "HOST:PORT") != NULL, "message: %s", err);
  client = flurry_client_create("127.0.0.1:1,,127.0.0.1:2", 100, 0, err, sizeof err);
  CHECK(client == NULL && strstr(err, "empty entry") != NULL, "empty entry: %s", err);
  client = flurry_client_create("127.0.0.1:7420", 100, 1, err, sizeof err);
  CHECK(client == NULL && strstr(err, "prefetch") != NULL, "prefetch 1: %s", err);
  /* A tiny error buffer is truncated, NUL-terminated. */
  memset(err, 'x', sizeof err);
  client = flurry_client_create("nonsense", 100, 0, err, 4);
  CHECK(client == NULL && strlen(err) == 3, "truncated message: %s", err);
  client = flurry_client_create("nonsense", 100, 0, NULL, 0);
  CHECK(client == NULL, "NULL err buffer");

  snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)dead_port);
  client = flurry_client_create(servers, 10, 0, err, sizeof err);
  CHECK(client != NULL, "create: %s", err);
  if (client != NULL) {
    rc = flurry_client_get(client, ids, 10, err, sizeof err);
    CHECK(rc == FLURRY_ERR_NO_ANSWER, "get from a dead server: %d (%s)", rc, flurry_strerror(rc));
    CHECK(strstr(err, "no answer from 127.0.0.1:") != NULL, "message: %s", err);
    rc = flurry_client_next(client, &ids[0], err, sizeof err);
    CHECK(rc == FLURRY_ERR_NO_ANSWER, "next from a dead server: %d", rc);
    flurry_client_destroy(client);
  }
  flurry_client_destroy(NULL);
  CHECK(flurry_client_next(NULL, &ids[0], err, sizeof err) == FLURRY_ERR_INVALID_ARGUMENT, "next on NULL");
  CHECK(strcmp(flurry_strerror(FLURRY_ERR_FENCED), "fenced") == 0, "strerror");
  CHECK(strcmp(flurry_strerror(12345), "unknown") == 0, "strerror of an unknown code");

  flurry_test_servers_stop();
  if (failures != 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("c_abi_test: all checks passed\n");
  return 0;
}
