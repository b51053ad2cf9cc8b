package changestream

import "github.com/tide-cdc/tide/mongowire/internal/mongoerr"

// resumableCodes are the transient failures after which a driver may resume
// a change stream: mongod labels them ResumableChangeStreamError when they
// fail a change-stream aggregate or getMore (retriable, network and
// not-primary errors, 234 RetryChangeStream, 133
// FailedToSatisfyReadPreference).
var resumableCodes = map[int32]bool{
	6: true, 7: true, 89: true, 91: true, 133: true, 189: true, 234: true, 262: true,
	9001: true, 10107: true, 11600: true, 11602: true, 13435: true, 13436: true,
	63: true, 150: true, 13388: true,
}

// LabelError adds the label mongod puts on a failed change-stream aggregate
// or getMore: ResumableChangeStreamError for a transient code,
// NonResumableChangeStreamError for 280 and 286. An error that already
// carries labels (for example from a failCommand fail point that names
// them) is left as it is, and so is any other error.
func LabelError(err error) error {
	e, ok := mongoerr.As(err)
	if !ok || len(e.Labels) > 0 {
		return err
	}
	switch {
	case resumableCodes[e.Code]:
		e.Labels = []string{labelResumable}
	case e.Code == mongoerr.ChangeStreamFatalError || e.Code == mongoerr.ChangeStreamHistoryLost:
		e.Labels = []string{labelNonResumable}
	}
	return err
}
