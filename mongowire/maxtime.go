package mongowire

import (
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// maxTime checks a command's maxTimeMS as mongod parses it and reports 50
// MaxTimeMSExpired when the limit passed before the command ran (while a
// fail point blocked it: the commands themselves run in memory, well
// inside any limit). getMore's maxTimeMS is its await time, not a limit.
func maxTime(r *request, received time.Time) error {
	v, err := r.cmd.LookupErr("maxTimeMS")
	if err != nil || r.name == "getMore" {
		return nil
	}
	var ms float64
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		if v.Type == bson.TypeDecimal128 {
			d, _ := v.Decimal128OK()
			f, _, err := d.BigInt()
			if err != nil {
				return mongoerr.New(mongoerr.BadValue, "maxTimeMS out of range")
			}
			ms = float64(f.Int64())
		} else {
			ms, _ = v.AsFloat64OK()
		}
	default:
		return mongoerr.New(mongoerr.BadValue, "maxTimeMS must be a number")
	}
	switch {
	case ms < 0 || ms > math.MaxInt32:
		return mongoerr.New(mongoerr.BadValue, "maxTimeMS out of range")
	case v.Type == bson.TypeDouble && math.Floor(ms) != ms:
		return mongoerr.New(mongoerr.BadValue, "maxTimeMS has non-integral value")
	case ms == 0: // no limit
		return nil
	}
	if time.Since(received) >= time.Duration(ms)*time.Millisecond {
		return mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
	}
	return nil
}
