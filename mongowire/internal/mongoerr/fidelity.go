package mongoerr

// Codes of snapshot reads and of the API version parameters, kept apart
// from the main table so that the features adding them stay in files of
// their own.
const (
	SnapshotTooOld      int32 = 239
	SnapshotUnavailable int32 = 246
	APIVersionError     int32 = 322
	APIDeprecationError int32 = 324
	SearchNotEnabled    int32 = 31082
)

func init() {
	for code, name := range map[int32]string{
		SnapshotTooOld:      "SnapshotTooOld",
		SnapshotUnavailable: "SnapshotUnavailable",
		APIVersionError:     "APIVersionError",
		APIDeprecationError: "APIDeprecationError",
		SearchNotEnabled:    "SearchNotEnabled",
	} {
		names[code] = name
	}
}
