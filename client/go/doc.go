// Package flurry is the Go client of flurry, a server of unique 64-bit IDs (Snowflake-style)
// over UDP: it asks one of a list of flurryd servers for IDs, or for numbers of a named
// sequence, fails over between them, and checks every answer by the protocol's rules
// (proto/PROTOCOL.md).
//
// Make a Client with New from DefaultOptions and the servers' "HOST:PORT"; Get returns exactly
// n unique IDs, Next one (from a local buffer refilled in the background with
// Options.Prefetch), GetSeq numbers of a named sequence, Info the layout that decodes the
// server's IDs (Layout.Decode), Ping a round trip. Every call that waits on the network has a
// Context variant (GetContext, NextContext, ...) whose cancellation or deadline ends it
// wherever it waits. A Client is safe for many goroutines; Close it when done.
//
// With Options.Key (ReadKeyFile) every request is signed and only answers whose MAC verifies
// are taken. Every error is an *Error: test it with errors.Is against ErrNoAnswer, ErrFenced,
// ErrDraining, ErrExhausted, ErrCanceled and the other sentinels.
//
// The ID forms — dec, hex, base32, readable, opaque and uuid — are FormatAs, ParseAs and
// ParseAny (and a function per form); the opaque form's keys come from ReadOpaqueKeyRing.
//
// Version is this client's release, the project's version. The module is not on a module
// proxy: require flurry.dev/client and replace it with the client/go directory of a clone
// (README.md, "Install").
package flurry
