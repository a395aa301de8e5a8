/* tests/client/c_abi_test.c — the C ABI (client/flurry_client.h), compiled as C, against the
 * in-process test server (real handler). Exits 0 when every check passes, 1 otherwise. */
#include "client/flurry_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Takes n IDs with flurry_client_next into ids[0..n), checking each call; stops at the first
 * failure. */
static void take_ids(flurry_client* client, uint64_t* ids, size_t n, const char* what) {
  char err[256];
  size_t i;
  for (i = 0; i < n; ++i) {
    const int rc = flurry_client_next(client, &ids[i], err, sizeof err);
    CHECK(rc == FLURRY_OK, "next %s: %d %s", what, rc, err);
    if (rc != FLURRY_OK) break;
  }
}

#define IDS 10000
/* The attempt timeout where an answer must come: the in-process servers answer in microseconds,
 * but a sanitizer build on a loaded 2-CPU machine can hold a thread for a good part of the
 * default 100 ms; a dead server costs it once. Where no answer comes, timeouts stay short. */
#define ANSWERED_MS 2000

/* 1000 ms after the default epoch, node 5, counter 7 (tests/client/cli_test.cc's known_id). */
#define KNOWN_ID 4194324487ULL

static void check_format(int form, const flurry_layout* layout, const char* tag, const flurry_keys* keys,
                         const char* expected) {
  char text[FLURRY_FORM_TEXT_MAX];
  char err[256];
  char parsed_tag[5];
  uint64_t id = 0;
  int form_read = -1;
  int rc = flurry_id_format(form, KNOWN_ID, layout, tag, keys, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_OK, "format %d: %d %s", form, rc, err);
  if (expected != NULL) CHECK(strcmp(text, expected) == 0, "form %d: %s, not %s", form, text, expected);
  rc = flurry_id_parse(form, text, layout, keys, &id, NULL, parsed_tag, sizeof parsed_tag, err, sizeof err);
  CHECK(rc == FLURRY_OK && id == KNOWN_ID, "parse %d of %s: %d %s", form, text, rc, err);
  CHECK(strcmp(parsed_tag, tag == NULL ? "" : tag) == 0, "tag %s", parsed_tag);
  rc = flurry_id_parse(FLURRY_FORM_ANY, text, layout, keys, &id, &form_read, NULL, 0, err, sizeof err);
  CHECK(rc == FLURRY_OK && id == KNOWN_ID && form_read == form, "parse any of %s: %d %d %s", text, rc, form_read, err);
}

/* Writes a key file with `mode`; returns 0 on success. */
static int write_key_file(const char* path, mode_t mode) {
  FILE* file = fopen(path, "w");
  if (file == NULL) return -1;
  fputs("[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n", file);
  fclose(file);
  return chmod(path, mode);
}

static void test_forms(uint16_t port) {
  char err[256];
  char text[FLURRY_FORM_TEXT_MAX];
  char servers[64];
  char key_path[] = "/tmp/flurry_c_abi_keys_XXXXXX";
  flurry_layout layout;
  flurry_keys* keys;
  flurry_client* client;
  uint64_t id = 0;
  int rc;
  const int fd = mkstemp(key_path);

  flurry_layout_default(&layout);
  check_format(FLURRY_FORM_DEC, NULL, NULL, NULL, "4194324487");
  check_format(FLURRY_FORM_HEX, NULL, NULL, NULL, "0x00000000fa005007");
  check_format(FLURRY_FORM_BASE32, NULL, NULL, NULL, "0000003X00M07");
  check_format(FLURRY_FORM_READABLE, &layout, "ORD", NULL, "240101000001000ORD0020487");
  check_format(FLURRY_FORM_READABLE, &layout, NULL, NULL, "2401010000010000020487");

  CHECK(fd >= 0, "mkstemp");
  if (fd >= 0) close(fd);
  CHECK(write_key_file(key_path, 0600) == 0, "writing %s", key_path);
  keys = flurry_keys_load(key_path, err, sizeof err);
  CHECK(keys != NULL, "keys: %s", err);
  if (keys != NULL) check_format(FLURRY_FORM_OPAQUE, NULL, NULL, keys, NULL);
  rc = flurry_id_parse(FLURRY_FORM_OPAQUE, "k2_0000000000000", NULL, keys, &id, NULL, NULL, 0, err, sizeof err);
  CHECK(rc == FLURRY_ERR_MALFORMED && strstr(err, "lacks") != NULL, "unknown key id: %d %s", rc, err);
  flurry_keys_destroy(keys);
  flurry_keys_destroy(NULL);
  CHECK(chmod(key_path, 0644) == 0, "chmod");
  CHECK(flurry_keys_load(key_path, err, sizeof err) == NULL && strstr(err, "0600 or stricter") != NULL,
        "a 0644 key file: %s", err);
  unlink(key_path);

  /* Errors. */
  rc = flurry_id_parse(FLURRY_FORM_ANY, "banana", &layout, NULL, &id, NULL, NULL, 0, err, sizeof err);
  CHECK(rc == FLURRY_ERR_MALFORMED, "banana: %d %s", rc, err);
  rc = flurry_id_parse(FLURRY_FORM_BASE32, "0000003U00M07", NULL, NULL, &id, NULL, NULL, 0, err, sizeof err);
  CHECK(rc == FLURRY_ERR_MALFORMED && strstr(err, "'U' at position 8") != NULL, "U: %d %s", rc, err);
  rc = flurry_id_format(FLURRY_FORM_READABLE, KNOWN_ID, NULL, NULL, NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "readable without a layout: %d %s", rc, err);
  rc = flurry_id_format(FLURRY_FORM_OPAQUE, KNOWN_ID, NULL, NULL, NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "opaque without keys: %d %s", rc, err);
  rc = flurry_id_format(FLURRY_FORM_READABLE, KNOWN_ID, &layout, "ord", NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_ERR_MALFORMED, "lower-case tag: %d %s", rc, err);
  rc = flurry_id_format(FLURRY_FORM_BASE32, KNOWN_ID, NULL, NULL, NULL, text, 13, err, sizeof err);
  CHECK(rc == FLURRY_ERR_BUFFER_TOO_SMALL, "13 bytes for 13 chars and a NUL: %d %s", rc, err);
  rc = flurry_id_format(7, KNOWN_ID, NULL, NULL, NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "form 7: %d", rc);
  layout.time_bits = 60;
  rc = flurry_id_format(FLURRY_FORM_READABLE, KNOWN_ID, &layout, NULL, NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT && strstr(err, "layout") != NULL, "bad layout: %d %s", rc, err);
  CHECK(strcmp(flurry_strerror(FLURRY_ERR_MALFORMED), "malformed") == 0, "strerror malformed");

  /* The layout of a server (node 3, the default layout) reads its IDs. */
  snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)port);
  client = flurry_client_create(servers, ANSWERED_MS, 0, err, sizeof err);
  CHECK(client != NULL, "create: %s", err);
  if (client == NULL) return;
  rc = flurry_client_layout(client, &layout, err, sizeof err);
  CHECK(rc == FLURRY_OK && layout.time_bits == 41 && layout.node_bits == 10, "layout: %d %s", rc, err);
  rc = flurry_client_next(client, &id, err, sizeof err);
  CHECK(rc == FLURRY_OK, "next: %s", err);
  rc = flurry_id_format(FLURRY_FORM_READABLE, id, &layout, "T", NULL, text, sizeof text, err, sizeof err);
  CHECK(rc == FLURRY_OK && strlen(text) == 23 && strncmp(text + 15, "T001", 4) == 0, "readable of %llu: %s %s",
        (unsigned long long)id, text, err);
  flurry_client_destroy(client);
}

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
  client = flurry_client_create(servers, ANSWERED_MS, 0, err, sizeof err);
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
  /* next_seq without prefetch: one request per number of "tickets" (served from 1). */
  for (i = 0; i < 100; ++i) {
    rc = flurry_client_next_seq(client, "tickets", &ids[i], err, sizeof err);
    CHECK(rc == FLURRY_OK, "next_seq: %d %s", rc, err);
    CHECK(i == 0 || ids[i] > ids[i - 1], "next_seq not increasing from one worker: %llu",
          (unsigned long long)ids[i]);
  }
  CHECK(count_duplicates(ids, 100) == 0, "duplicate sequence numbers");
  CHECK(ids[0] == 1, "the first number of tickets: %llu", (unsigned long long)ids[0]);
  rc = flurry_client_next_seq(client, "orders", &ids[0], err, sizeof err);
  CHECK(rc == FLURRY_ERR_UNKNOWN_SEQUENCE, "next_seq of an unknown name: %d %s", rc, err);
  rc = flurry_client_next_seq(client, NULL, &ids[0], err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "next_seq of NULL: %d", rc);
  rc = flurry_client_next_seq(client, "tickets", NULL, err, sizeof err);
  CHECK(rc == FLURRY_ERR_INVALID_ARGUMENT, "next_seq into NULL: %d", rc);
  CHECK(flurry_client_next_seq(NULL, "tickets", &ids[0], err, sizeof err) == FLURRY_ERR_INVALID_ARGUMENT,
        "next_seq on NULL");
  flurry_client_destroy(client);

  /* next() with prefetch, a dead server first in the list (its timeout is paid once, then the
   * client stays on the live one). */
  snprintf(servers, sizeof servers, "127.0.0.1:%u, 127.0.0.1:%u", (unsigned)dead_port, (unsigned)port);
  client = flurry_client_create(servers, ANSWERED_MS, 1000, err, sizeof err);
  CHECK(client != NULL, "create with prefetch: %s", err);
  if (client != NULL) {
    take_ids(client, ids, 5000, "with prefetch");
    CHECK(count_duplicates(ids, 5000) == 0, "duplicate IDs with prefetch");
    /* next_seq with prefetch: a buffer for "tickets", refilled in the background. */
    for (i = 0; i < 5000; ++i) {
      rc = flurry_client_next_seq(client, "tickets", &ids[i], err, sizeof err);
      CHECK(rc == FLURRY_OK, "next_seq with prefetch: %d %s", rc, err);
      if (rc != FLURRY_OK) break;
    }
    CHECK(count_duplicates(ids, 5000) == 0, "duplicate sequence numbers with prefetch");
    CHECK(ids[0] > 100, "numbers the first client took were issued again: %llu", (unsigned long long)ids[0]);
    flurry_client_destroy(client);
  }

  /* Created from options, polling for answers (the polling itself: client_test.cc). */
  {
    flurry_client_options options;
    memset(&options, 0, sizeof options);
    snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)port);
    options.servers_csv = servers;
    options.timeout_ms = ANSWERED_MS;
    options.poll_us = 200;
    client = flurry_client_create_with_options(&options, err, sizeof err);
    CHECK(client != NULL, "create with options: %s", err);
    if (client != NULL) {
      take_ids(client, ids, 1000, "polling");
      CHECK(count_duplicates(ids, 1000) == 0, "duplicate IDs, polling");
      flurry_client_destroy(client);
    }
    /* The field reaches the client's checks: 10001 us is refused by name. */
    options.poll_us = 10001;
    client = flurry_client_create_with_options(&options, err, sizeof err);
    CHECK(client == NULL && strstr(err, "poll 10001 us is out of range 0..10000 us") != NULL,
          "poll 10001: %s", err);
    CHECK(flurry_client_create_with_options(NULL, err, sizeof err) == NULL && strstr(err, "NULL") != NULL,
          "options NULL: %s", err);
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
  /* Signed: the right key gets IDs; a wrong secret gets none (the server drops a bad MAC);
   * an unsigned client is refused; a missing key file is named. */
  {
    uint8_t secret[16];
    const uint16_t signed_port = flurry_test_signed_server_start();
    for (i = 0; i < 16; ++i) secret[i] = (uint8_t)i;
    snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)signed_port);
    client = flurry_client_create_signed(servers, ANSWERED_MS, 0, 7, secret, err, sizeof err);
    CHECK(client != NULL, "create signed: %s", err);
    if (client != NULL) {
      rc = flurry_client_get(client, ids, 100, err, sizeof err);
      CHECK(rc == FLURRY_OK, "signed get: %d %s", rc, err);
      flurry_client_destroy(client);
    }
    secret[0] ^= 0x80;
    client = flurry_client_create_signed(servers, 20, 0, 7, secret, err, sizeof err);
    CHECK(client != NULL, "create signed (wrong secret): %s", err);
    if (client != NULL) {
      rc = flurry_client_get(client, ids, 1, err, sizeof err);
      CHECK(rc == FLURRY_ERR_NO_ANSWER, "wrong secret: %d %s", rc, err);
      flurry_client_destroy(client);
    }
    client = flurry_client_create(servers, ANSWERED_MS, 0, err, sizeof err);
    CHECK(client != NULL, "create unsigned: %s", err);
    if (client != NULL) {
      rc = flurry_client_get(client, ids, 1, err, sizeof err);
      CHECK(rc == FLURRY_ERR_UNAUTHORIZED && strstr(err, "auth_required") != NULL,
            "unsigned: %d %s", rc, err);
      flurry_client_destroy(client);
    }
    client = flurry_client_create_with_key_file(servers, 100, 0, "/nonexistent/key", err,
                                                sizeof err);
    CHECK(client == NULL && strstr(err, "/nonexistent/key") != NULL, "missing key file: %s", err);
    CHECK(flurry_client_create_signed(servers, 100, 0, 0, secret, err, sizeof err) == NULL,
          "key id 0 accepted");
  }

  flurry_client_destroy(NULL);
  CHECK(flurry_client_next(NULL, &ids[0], err, sizeof err) == FLURRY_ERR_INVALID_ARGUMENT, "next on NULL");
  CHECK(strcmp(flurry_strerror(FLURRY_ERR_FENCED), "fenced") == 0, "strerror");
  CHECK(strcmp(flurry_strerror(12345), "unknown") == 0, "strerror of an unknown code");

  test_forms(port);
  flurry_test_servers_stop();
  if (failures != 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("c_abi_test: all checks passed\n");
  return 0;
}
