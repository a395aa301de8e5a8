// client/java/.../PingResult.java — what one PING exchange measured.
package dev.flurry.client;

import java.time.Duration;

/**
 * @param rtt send of the answered attempt to receipt of the accepted answer
 * @param server "HOST:PORT" as given to the builder
 * @param node the node id in the answer's header
 */
public record PingResult(Duration rtt, String server, int node) {}
