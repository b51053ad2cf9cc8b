package mql

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

// The date part operators ($year ... $millisecond, $dayOfWeek,
// $dayOfYear, $week, $isoWeek, $isoWeekYear, $isoDayOfWeek) in their
// three forms, as mongod's DateExpressionAcceptingTimeZone parses them:
// {$year: <date>}, {$year: [<date>]} and {$year: {date, timezone}}.

var datePartNames = map[string]bool{
	"$year": true, "$month": true, "$dayOfMonth": true, "$hour": true, "$minute": true,
	"$second": true, "$millisecond": true, "$dayOfWeek": true, "$dayOfYear": true,
	"$week": true, "$isoWeek": true, "$isoWeekYear": true, "$isoDayOfWeek": true,
}

func compileDatePart(name string, arg bson.RawValue, vars scope) (expr, error) {
	dateArg, tzArg := arg, bson.RawValue{}
	switch {
	case arg.Type == bson.TypeEmbeddedDocument && !isOperatorDoc(arg) && arrayLen(arg.Value) > 0:
		dateArg = bson.RawValue{}
		it := iterDoc(arg.Value)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "date":
				dateArg = v
			case "timezone":
				tzArg = v
			default:
				return nil, mongoerr.New(40535, "unrecognized option to %s: \"%s\"", name, k)
			}
		}
		if dateArg.Type == 0 {
			return nil, mongoerr.New(40539, "missing 'date' argument to %s, provided: %s: %s", name, name, shortString(arg))
		}
	case arg.Type == bson.TypeArray:
		elems := arrayValues(arg.Value)
		if len(elems) != 1 {
			return nil, mongoerr.New(40536, "%s accepts exactly one argument if given an array, but was given %d", name, len(elems))
		}
		dateArg = elems[0]
	}
	dateE, err := compileExpr(dateArg, vars)
	if err != nil {
		return nil, err
	}
	var tzE expr
	if tzArg.Type != 0 {
		if tzE, err = compileExpr(tzArg, vars); err != nil {
			return nil, err
		}
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		d, err := dateE.eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(d) {
			return nullValue, nil
		}
		loc := time.UTC
		if tzE != nil {
			tz, err := tzE.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(tz) {
				return nullValue, nil
			}
			if loc, err = parseTimezone(tz); err != nil {
				return missing, err
			}
		}
		t, err := toTime(d)
		if err != nil {
			return missing, err
		}
		return vInt32(int32(datePart(name, t.In(loc)))), nil
	}}, nil
}

// toTime converts a date, timestamp or ObjectId to a time, as mongod's
// Value::coerceToDate does for the date operators.
func toTime(v bson.RawValue) (time.Time, error) {
	switch v.Type {
	case bson.TypeDateTime:
		return time.UnixMilli(asInt64(v)).UTC(), nil
	case bson.TypeTimestamp:
		s, _ := v.Timestamp()
		return time.Unix(int64(s), 0).UTC(), nil
	case bson.TypeObjectID:
		return v.ObjectID().Timestamp().UTC(), nil
	}
	return time.Time{}, mongoerr.New(16006, "can't convert from BSON type %s to Date", typeName(v.Type))
}

func datePart(name string, t time.Time) int {
	switch name {
	case "$year":
		return t.Year()
	case "$month":
		return int(t.Month())
	case "$dayOfMonth":
		return t.Day()
	case "$hour":
		return t.Hour()
	case "$minute":
		return t.Minute()
	case "$second":
		return t.Second()
	case "$millisecond":
		return t.Nanosecond() / 1e6
	case "$dayOfWeek":
		return int(t.Weekday()) + 1
	case "$dayOfYear":
		return t.YearDay()
	case "$week":
		// Weeks start on Sunday; days before the year's first Sunday are
		// in week 0 (strftime's %U).
		return (t.YearDay() - 1 + 7 - int(t.Weekday())) / 7
	case "$isoWeek":
		_, w := t.ISOWeek()
		return w
	case "$isoWeekYear":
		y, _ := t.ISOWeek()
		return y
	case "$isoDayOfWeek":
		return (int(t.Weekday())+6)%7 + 1
	}
	return 0
}
