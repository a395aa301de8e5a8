// client/java/.../Counters.java — a snapshot of one client's counters, monotonic since it was
// built; the same set as the C++ client's Counters (client/client.h).
package dev.flurry.client;

/**
 * Per-client counters.
 *
 * @param requests datagrams sent (every attempt and re-ask)
 * @param responses answers accepted for the outstanding request
 * @param retries RETRY answers
 * @param timeouts attempts that got no accepted answer in time
 * @param fenced FENCED answers
 * @param ignoredResponses well-formed, but for another request id (late or foreign)
 * @param malformedResponses failed the decoding rules, or inconsistent with the request (wrong
 *     opcode, more IDs than asked)
 * @param sendErrors send failures (counted as failed attempts)
 * @param unverifiedResponses with a key: answers shorter than 28 bytes or whose MAC does not
 *     verify (unsigned ones included), counted before any other rule and never used
 * @param idsReceived IDs in accepted OK answers
 * @param prefetchRefills background refills that added IDs
 * @param prefetchFailures background refills that failed
 */
public record Counters(
    long requests,
    long responses,
    long retries,
    long timeouts,
    long fenced,
    long ignoredResponses,
    long malformedResponses,
    long sendErrors,
    long unverifiedResponses,
    long idsReceived,
    long prefetchRefills,
    long prefetchFailures) {}
