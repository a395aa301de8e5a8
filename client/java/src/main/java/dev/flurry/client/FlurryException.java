// client/java/.../FlurryException.java — every failure of the client, with a code (the C++
// client's ErrorCode) and one sentence for a person naming what failed, where, and the fix
// when known, e.g. "no answer from 127.0.0.1:7420 after 5 attempts of 100 ms".
package dev.flurry.client;

import java.io.IOException;

/** A failed client call; {@link #code()} says why. */
public final class FlurryException extends IOException {
  private static final long serialVersionUID = 1L;

  /** Why a call failed (client/client.h ErrorCode). */
  public enum Code {
    /** An option out of bounds, a server not "HOST:PORT", n above GET_COUNT_MAX. */
    INVALID_ARGUMENT,
    /** A server name has no IPv4 address. */
    RESOLVE_FAILED,
    /** The UDP socket or the prefetch thread could not be created. */
    SYSTEM,
    /** Every attempt timed out or could not be sent. */
    NO_ANSWER,
    /**
     * The attempts ran out and at least one server answered FENCED because it holds no node id
     * (lost its lease, or not claimed yet).
     */
    FENCED,
    /** The server kept answering RETRY for longer than the retry budget. */
    RETRY_EXHAUSTED,
    /** The server answered BAD_REQUEST; the message names the request error. */
    BAD_REQUEST,
    /** The server answered UNAUTHORIZED; the message names the request error. */
    UNAUTHORIZED,
    /** The layout a server reported over INFO fails the layout rules. */
    BAD_LAYOUT,
    /**
     * The client was closed (also while the call was waiting), or the calling thread was
     * interrupted while the call waited (message "interrupted"; the interrupt stays set).
     */
    SHUTTING_DOWN,
    /** GET_SEQ: the server has no sequence of that name (flurryctl seq create). */
    UNKNOWN_SEQUENCE,
    /**
     * GET_SEQ: a monotonic sequence that no server of the list serves (the message names the
     * owner's node when one is known); outranks FENCED and NO_ANSWER when the attempts run out.
     */
    NOT_OWNER,
    /**
     * The attempts ran out and every server that answered FENCED was draining: its operator is
     * stopping it (a planned move, not a lost node id).
     */
    DRAINING,
    /**
     * A server answered EXHAUSTED: the layout's time field (GET_IDS) or the sequence's numbers
     * (GET_SEQ) have run out; no server will ever issue them again. Asked of no other server.
     */
    EXHAUSTED
  }

  private final Code code;

  public FlurryException(Code code, String message) {
    super(message);
    this.code = code;
  }

  public Code code() {
    return code;
  }

  @Override
  public String toString() {
    return "FlurryException(" + code + "): " + getMessage();
  }
}
