// errors.go — the client's error taxonomy, one ErrorCode per way a call can fail, as the C++
// client's ErrorCode (client/client.h). Every error is an *Error whose Message is one sentence
// for a person naming the servers, attempts and timeout involved; compare codes with
// errors.Is(err, flurry.ErrNoAnswer) and friends.
package flurry

// ErrorCode says why a call failed.
type ErrorCode uint8

const (
	CodeInvalidArgument ErrorCode = iota + 1 // bad Options, malformed "HOST:PORT", n too large
	CodeResolveFailed                        // a server name has no IPv4 address
	CodeSystem                               // the UDP socket could not be opened
	CodeNoAnswer                             // every attempt timed out (or could not be sent)
	CodeFenced                               // attempts ran out and a server answered FENCED
	CodeRetryExhausted                       // RETRY answers for longer than Options.RetryBudget
	CodeBadRequest                           // the server answered BAD_REQUEST
	CodeUnauthorized                         // the server answered UNAUTHORIZED (signed: or, unsigned, until the attempts ran out)
	CodeClosed                               // the Client is closed (or was closed mid-call)
	CodeUnknownSequence                      // GET_SEQ: the server has no sequence of that name
	CodeNotOwner                             // GET_SEQ: a monotonic sequence no server of the list serves
)

var errorCodeNames = [...]string{
	"ok", "invalid_argument", "resolve_failed", "system", "no_answer", "fenced",
	"retry_exhausted", "bad_request", "unauthorized", "closed", "unknown_sequence", "not_owner",
}

func (c ErrorCode) String() string { return nameOf(errorCodeNames[:], int(c), "error code") }

// Error is every error this package returns.
type Error struct {
	Code    ErrorCode
	Message string // e.g. "no answer from 127.0.0.1:7420 after 5 attempts of 100ms"
}

func (e *Error) Error() string { return "flurry: " + e.Message }

// Is makes errors.Is(err, ErrNoAnswer) true for every error of that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; their messages are only the code's name.
var (
	ErrInvalidArgument = &Error{CodeInvalidArgument, "invalid_argument"}
	ErrResolveFailed   = &Error{CodeResolveFailed, "resolve_failed"}
	ErrSystem          = &Error{CodeSystem, "system"}
	ErrNoAnswer        = &Error{CodeNoAnswer, "no_answer"}
	ErrFenced          = &Error{CodeFenced, "fenced"}
	ErrRetryExhausted  = &Error{CodeRetryExhausted, "retry_exhausted"}
	ErrBadRequest      = &Error{CodeBadRequest, "bad_request"}
	ErrUnauthorized    = &Error{CodeUnauthorized, "unauthorized"}
	ErrClosed          = &Error{CodeClosed, "closed"}
	ErrUnknownSequence = &Error{CodeUnknownSequence, "unknown_sequence"}
	ErrNotOwner        = &Error{CodeNotOwner, "not_owner"}
)

func newError(code ErrorCode, message string) *Error { return &Error{code, message} }

func errClosed() *Error { return newError(CodeClosed, "the client is closed") }
