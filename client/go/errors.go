// errors.go — the client's error taxonomy, one ErrorCode per way a call can fail, as the C++
// client's ErrorCode (client/client.h). Every error is an *Error whose Message is one sentence
// for a person naming the servers, attempts and timeout involved; compare codes with
// errors.Is(err, flurry.ErrNoAnswer) and friends. An error of a call whose context ended
// (CodeCanceled) also wraps ctx.Err(): errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) says which.

package flurry

// ErrorCode says why a call failed.
type ErrorCode uint8

const (
	CodeInvalidArgument ErrorCode = iota + 1 // bad Options, malformed "HOST:PORT", n too large, a text that is no ID form
	CodeResolveFailed                        // a server name has no IPv4 address
	CodeSystem                               // a UDP socket could not be opened or connected
	CodeNoAnswer                             // every attempt timed out (or could not be sent)
	CodeFenced                               // attempts ran out and a server answered FENCED (it holds no node id)
	CodeRetryExhausted                       // RETRY answers for longer than Options.RetryBudget
	CodeBadRequest                           // the server answered BAD_REQUEST
	CodeUnauthorized                         // the server answered UNAUTHORIZED (signed: or, unsigned, until the attempts ran out)
	CodeClosed                               // the Client is closed (or was closed mid-call)
	CodeUnknownSequence                      // GET_SEQ: the server has no sequence of that name
	CodeNotOwner                             // GET_SEQ: a monotonic sequence no server of the list serves
	CodeDraining                             // attempts ran out and every server that answered FENCED was draining
	CodeExhausted                            // EXHAUSTED: the layout's time (GET_IDS) or the sequence (GET_SEQ) ran out; no server can serve it again
	CodeCanceled                             // the call's context was canceled or its deadline passed (wraps ctx.Err())
)

var errorCodeNames = [...]string{
	"ok", "invalid_argument", "resolve_failed", "system", "no_answer", "fenced",
	"retry_exhausted", "bad_request", "unauthorized", "closed", "unknown_sequence", "not_owner",
	"draining", "exhausted", "canceled",
}

func (c ErrorCode) String() string { return nameOf(errorCodeNames[:], int(c), "error code") }

// Error is every error this package returns.
type Error struct {
	Code    ErrorCode
	Message string // e.g. "no answer from 127.0.0.1:7420 after 5 attempts of 100ms"
	cause   error  // CodeCanceled: the context's error
}

func (e *Error) Error() string { return "flurry: " + e.Message }

// Is makes errors.Is(err, ErrNoAnswer) true for every error of that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap is the context's error of a CodeCanceled error (nil for the others), so that
// errors.Is(err, context.DeadlineExceeded) works.
func (e *Error) Unwrap() error { return e.cause }

// Sentinels for errors.Is; their messages are only the code's name.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument, Message: "invalid_argument"}
	ErrResolveFailed   = &Error{Code: CodeResolveFailed, Message: "resolve_failed"}
	ErrSystem          = &Error{Code: CodeSystem, Message: "system"}
	ErrNoAnswer        = &Error{Code: CodeNoAnswer, Message: "no_answer"}
	ErrFenced          = &Error{Code: CodeFenced, Message: "fenced"}
	ErrRetryExhausted  = &Error{Code: CodeRetryExhausted, Message: "retry_exhausted"}
	ErrBadRequest      = &Error{Code: CodeBadRequest, Message: "bad_request"}
	ErrUnauthorized    = &Error{Code: CodeUnauthorized, Message: "unauthorized"}
	ErrClosed          = &Error{Code: CodeClosed, Message: "closed"}
	ErrUnknownSequence = &Error{Code: CodeUnknownSequence, Message: "unknown_sequence"}
	ErrNotOwner        = &Error{Code: CodeNotOwner, Message: "not_owner"}
	ErrDraining        = &Error{Code: CodeDraining, Message: "draining"}
	ErrExhausted       = &Error{Code: CodeExhausted, Message: "exhausted"}
	ErrCanceled        = &Error{Code: CodeCanceled, Message: "canceled"}
)

func newError(code ErrorCode, message string) *Error { return &Error{Code: code, Message: message} }

func errClosed() *Error { return newError(CodeClosed, "the client is closed") }
