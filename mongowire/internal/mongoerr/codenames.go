package mongoerr

// Names of mongod's codes that this server does not raise itself but a
// client can still see: fail points inject any code, and a client reads
// the reply's codeName (the drivers' spec tests match on it), so a code
// replied as "Location<n>" where mongod names it breaks them.
func init() {
	for code, name := range map[int32]string{
		24:    "LockTimeout",
		263:   "IncompatibleCollationVersion",
		64:    "WriteConcernFailed",
		79:    "UnknownReplWriteConcern",
		100:   "UnsatisfiableWriteConcern",
		125:   "CommandFailed",
		133:   "FailedToSatisfyReadPreference",
		134:   "ReadConcernMajorityNotAvailableYet",
		136:   "CappedPositionLost",
		150:   "StaleEpoch",
		166:   "CommandNotSupportedOnView",
		167:   "OptionNotSupportedOnView",
		175:   "QueryPlanKilled",
		189:   "PrimarySteppedDown",
		202:   "NetworkInterfaceExceededTimeLimit",
		211:   "KeyNotFound",
		244:   "TransactionAborted",
		257:   "TransactionTooLarge",
		262:   "ExceededTimeLimit",
		267:   "PreparedTransactionInProgress",
		9001:  "SocketException",
		11601: "Interrupted",
		11602: "InterruptedDueToReplStateChange",
		13436: "NotPrimaryOrSecondary",
	} {
		if _, ok := names[code]; !ok {
			names[code] = name
		}
	}
}
