/* tests/client/c_abi_server.h — start and stop the in-process test server (test_server.h)
 * from the C ABI test. C99. Each start function returns the UDP port on 127.0.0.1. */
#ifndef FLURRY_TESTS_C_ABI_SERVER_H
#define FLURRY_TESTS_C_ABI_SERVER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A server running the real handler (node 3), ceiling far above now, serving the segment
 * sequence "tickets" from 1. */
uint16_t flurry_test_server_start(void);
/* A bound socket that never answers. */
uint16_t flurry_test_dead_server_start(void);
/* Stops both. */
/* A server with --auth required and the key id 7, secret bytes 0, 1, ..., 15. */
uint16_t flurry_test_signed_server_start(void);

void flurry_test_servers_stop(void);

#ifdef __cplusplus
}
#endif

#endif
