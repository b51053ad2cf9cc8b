// Package mongoerr is the error vocabulary of the embedded MongoDB server:
// an error that carries a MongoDB code, code name and labels, so that the
// store, the query language and the command layer can all fail the way
// MongoDB fails, and clients (drivers, mongosh) react as they would to a
// real server. It sits below every other mongowire package.
package mongoerr

import (
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Error is a failure a client should see as a command error:
// {ok: 0, errmsg, code, codeName, errorLabels?} plus any Info fields.
type Error struct {
	Code     int32
	CodeName string
	Message  string
	Labels   []string // errorLabels, e.g. "ResumableChangeStreamError"
	Info     bson.D   // extra reply fields, e.g. keyPattern/keyValue for DuplicateKey
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.CodeName, e.Code, e.Message)
}

// HasLabel reports whether e carries label.
func (e *Error) HasLabel(label string) bool { return slices.Contains(e.Labels, label) }

// New returns an error with the given code; the code name is looked up.
func New(code int32, format string, args ...any) *Error {
	return &Error{Code: code, CodeName: Name(code), Message: fmt.Sprintf(format, args...)}
}

// As returns err as an *Error if it is one (anywhere in its chain).
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Codes used by the server, as MongoDB numbers them (src/mongo/base/error_codes.yml).
const (
	InternalError                  int32 = 1
	BadValue                       int32 = 2
	NoSuchKey                      int32 = 4
	UnsupportedFormat              int32 = 12
	Unauthorized                   int32 = 13
	TypeMismatch                   int32 = 14
	Overflow                       int32 = 15
	InvalidLength                  int32 = 16
	IllegalOperation               int32 = 20
	NamespaceNotFound              int32 = 26
	IndexNotFound                  int32 = 27
	PathNotViable                  int32 = 28
	ConflictingUpdateOperators     int32 = 40
	CursorNotFound                 int32 = 43
	NamespaceExists                int32 = 48
	MaxTimeMSExpired               int32 = 50
	DollarPrefixedFieldName        int32 = 52
	EmptyFieldName                 int32 = 56
	ConversionFailure              int32 = 241
	InvalidIdField                 int32 = 53
	NotSingleValueField            int32 = 54
	CommandNotFound                int32 = 59
	ImmutableField                 int32 = 66
	InvalidOptions                 int32 = 72
	InvalidNamespace               int32 = 73
	IndexOptionsConflict           int32 = 85
	IndexKeySpecsConflict          int32 = 86
	NetworkTimeout                 int32 = 89
	OperationFailed                int32 = 96
	ConflictingOperationInProgress int32 = 117
	CommandNotSupported            int32 = 115
	InvalidPipelineOperator        int32 = 168
	ChangeStreamFatalError         int32 = 280
	ChangeStreamHistoryLost        int32 = 286
	APIStrictError                 int32 = 323
	NoSuchTransaction              int32 = 251
	BSONObjectTooLarge             int32 = 10334
	DuplicateKey                   int32 = 11000
	Location15998                  int32 = 15998
	Location16410                  int32 = 16410
	Location17276                  int32 = 17276
	Location40324                  int32 = 40324 // unrecognized pipeline stage name
	IDLUnknownField                int32 = 40415
	Location40573                  int32 = 40573
	Location31254                  int32 = 31254 // projection: cannot do exclusion in inclusion projection
	FailedToParse                  int32 = 9
	UnknownError                   int32 = 8
	NoMatchingDocument             int32 = 47
	InvalidBSON                    int32 = 22
	InvalidResumeToken             int32 = 260
	NotWritablePrimary             int32 = 10107
	HostUnreachable                int32 = 6
	HostNotFound                   int32 = 7
	InterruptedAtShutdown          int32 = 11600
	NotPrimaryNoSecondaryOk        int32 = 13435
	ShutdownInProgress             int32 = 91
	CursorKilled                   int32 = 237
	RetryChangeStream              int32 = 234
	UnsupportedOpQueryCommand      int32 = 352
	TransactionTooOld              int32 = 225
	CursorInUse                    int32 = 143
	CannotCreateIndex              int32 = 67
	CannotIndexParallelArrays      int32 = 171
	OutOfDiskSpace                 int32 = 14031
	UserNotFound                   int32 = 11
	ProtocolError                  int32 = 17
	AuthenticationFailed           int32 = 18
	RoleNotFound                   int32 = 31
	MechanismUnavailable           int32 = 334
	UserAlreadyExists              int32 = 51003
	DocumentValidationFailure      int32 = 121
	QueryFeatureNotAllowed         int32 = 224
	InvalidUUID                    int32 = 207
	InvalidIndexSpecOption         int32 = 197
)

var names = map[int32]string{
	DocumentValidationFailure:      "DocumentValidationFailure",
	QueryFeatureNotAllowed:         "QueryFeatureNotAllowed",
	InvalidUUID:                    "InvalidUUID",
	InvalidIndexSpecOption:         "InvalidIndexSpecificationOption",
	InternalError:                  "InternalError",
	OutOfDiskSpace:                 "OutOfDiskSpace",
	UserNotFound:                   "UserNotFound",
	ProtocolError:                  "ProtocolError",
	AuthenticationFailed:           "AuthenticationFailed",
	RoleNotFound:                   "RoleNotFound",
	MechanismUnavailable:           "MechanismUnavailable",
	BadValue:                       "BadValue",
	NoSuchKey:                      "NoSuchKey",
	UnsupportedFormat:              "UnsupportedFormat",
	Unauthorized:                   "Unauthorized",
	TypeMismatch:                   "TypeMismatch",
	Overflow:                       "Overflow",
	InvalidLength:                  "InvalidLength",
	IllegalOperation:               "IllegalOperation",
	NamespaceNotFound:              "NamespaceNotFound",
	IndexNotFound:                  "IndexNotFound",
	PathNotViable:                  "PathNotViable",
	ConflictingUpdateOperators:     "ConflictingUpdateOperators",
	CursorNotFound:                 "CursorNotFound",
	NamespaceExists:                "NamespaceExists",
	MaxTimeMSExpired:               "MaxTimeMSExpired",
	DollarPrefixedFieldName:        "DollarPrefixedFieldName",
	EmptyFieldName:                 "EmptyFieldName",
	ConversionFailure:              "ConversionFailure",
	InvalidIdField:                 "InvalidIdField",
	NotSingleValueField:            "NotSingleValueField",
	CommandNotFound:                "CommandNotFound",
	ImmutableField:                 "ImmutableField",
	InvalidOptions:                 "InvalidOptions",
	InvalidNamespace:               "InvalidNamespace",
	IndexOptionsConflict:           "IndexOptionsConflict",
	IndexKeySpecsConflict:          "IndexKeySpecsConflict",
	NetworkTimeout:                 "NetworkTimeout",
	OperationFailed:                "OperationFailed",
	ConflictingOperationInProgress: "ConflictingOperationInProgress",
	CommandNotSupported:            "CommandNotSupported",
	InvalidPipelineOperator:        "InvalidPipelineOperator",
	ChangeStreamFatalError:         "ChangeStreamFatalError",
	ChangeStreamHistoryLost:        "ChangeStreamHistoryLost",
	APIStrictError:                 "APIStrictError",
	NoSuchTransaction:              "NoSuchTransaction",
	DuplicateKey:                   "DuplicateKey",
	BSONObjectTooLarge:             "BSONObjectTooLarge",
	IDLUnknownField:                "IDLUnknownField",
	ShutdownInProgress:             "ShutdownInProgress",
	CursorKilled:                   "CursorKilled",
	RetryChangeStream:              "RetryChangeStream",
	UnsupportedOpQueryCommand:      "UnsupportedOpQueryCommand",
	TransactionTooOld:              "TransactionTooOld",
	CursorInUse:                    "CursorInUse",
	CannotCreateIndex:              "CannotCreateIndex",
	CannotIndexParallelArrays:      "CannotIndexParallelArrays",
	FailedToParse:                  "FailedToParse",
	UnknownError:                   "UnknownError",
	NoMatchingDocument:             "NoMatchingDocument",
	InvalidBSON:                    "InvalidBSON",
	InvalidResumeToken:             "InvalidResumeToken",
	NotWritablePrimary:             "NotWritablePrimary",
	HostUnreachable:                "HostUnreachable",
	HostNotFound:                   "HostNotFound",
	InterruptedAtShutdown:          "InterruptedAtShutdown",
	NotPrimaryNoSecondaryOk:        "NotPrimaryNoSecondaryOk",
}

// Name returns MongoDB's code name for code. Codes MongoDB reports only by
// number (the "Location" codes) are named "Location<code>".
func Name(code int32) string {
	if n, ok := names[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}
