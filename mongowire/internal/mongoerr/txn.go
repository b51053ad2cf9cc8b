package mongoerr

// Codes and labels of multi-document transactions. They live apart from
// the main table so that the transaction work stays in files of its own.
const (
	WriteConflict                      int32 = 112
	TransactionCommitted               int32 = 256
	OperationNotSupportedInTransaction int32 = 263
	TransactionExceededLifetimeLimit   int32 = 290

	// LabelTransient marks an error after which the whole transaction may
	// be retried; LabelUnknownCommit a commit whose outcome is unknown, so
	// that commitTransaction may be retried.
	LabelTransient     = "TransientTransactionError"
	LabelUnknownCommit = "UnknownTransactionCommitResult"
)

func init() {
	for code, name := range map[int32]string{
		WriteConflict:                      "WriteConflict",
		TransactionCommitted:               "TransactionCommitted",
		OperationNotSupportedInTransaction: "OperationNotSupportedInTransaction",
		TransactionExceededLifetimeLimit:   "TransactionExceededLifetimeLimitSeconds",
	} {
		if _, ok := names[code]; !ok {
			names[code] = name
		}
	}
}

// WithLabels returns e with labels added (e itself is modified and
// returned, for chaining).
func (e *Error) WithLabels(labels ...string) *Error {
	for _, l := range labels {
		if !e.HasLabel(l) {
			e.Labels = append(e.Labels, l)
		}
	}
	return e
}
