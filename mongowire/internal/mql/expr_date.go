package mql

import (
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// The date part operators ($year ... $millisecond, $dayOfWeek,
// $dayOfYear, $week, $isoWeek, $isoWeekYear, $isoDayOfWeek) in their
// three forms, as mongod's DateExpressionAcceptingTimeZone parses them:
// {$year: <date>}, {$year: [<date>]} and {$year: {date, timezone}}.
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

// timeUnits are the units of $dateAdd, $dateSubtract and $dateDiff.
var timeUnits = map[string]bool{
	"year": true, "quarter": true, "month": true, "week": true, "day": true,
	"hour": true, "minute": true, "second": true, "millisecond": true,
}

func parseTimeUnit(op string, v bson.RawValue) (string, error) {
	if v.Type != bson.TypeString {
		return "", mongoerr.New(5439013, "%s requires 'unit' to be a string, but got %s", op, typeName(v.Type))
	}
	u := str(v)
	if !timeUnits[u] {
		return "", mongoerr.New(mongoerr.FailedToParse, "unknown time unit value: %s", u)
	}
	return u, nil
}

// dateArgs compiles the named arguments of a date operator; unknown
// names fail with code unknown, "Unrecognized argument to <op>: <name>".
func dateArgs(op string, arg bson.RawValue, vars scope, unknown int32, allowed ...string) (map[string]expr, error) {
	out := map[string]expr{}
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			return out, nil
		}
		known := false
		for _, a := range allowed {
			known = known || a == string(k)
		}
		if !known {
			return nil, mongoerr.New(unknown, "Unrecognized argument to %s: %s", op, k)
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		out[string(k)] = e
	}
}

// evalArgs evaluates the named arguments in order; null is reported when
// any of them (that is present) is nullish.
func evalArgs(c *evalCtx, args map[string]expr, names ...string) (map[string]bson.RawValue, bool, error) {
	out := make(map[string]bson.RawValue, len(names))
	for _, n := range names {
		e := args[n]
		if e == nil {
			continue
		}
		v, err := e.eval(c)
		if err != nil {
			return nil, false, err
		}
		if isNullish(v) {
			return nil, true, nil
		}
		out[n] = v
	}
	return out, false, nil
}

// compileDateAdd compiles $dateAdd and $dateSubtract: {startDate, unit,
// amount, timezone}. Units of a day or more move the calendar in the
// timezone (a month past the end of the next month ends on its last day);
// smaller units add absolute time.
func compileDateAdd(name string, arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(5166400, "%s expects an object as its argument", name)
	}
	args, err := dateArgs(name, arg, vars, 5166401, "startDate", "unit", "amount", "timezone")
	if err != nil {
		return nil, err
	}
	if args["startDate"] == nil || args["unit"] == nil || args["amount"] == nil {
		return nil, mongoerr.New(5166402, "%s requires startDate, unit, and amount to be present", name)
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		vals, null, err := evalArgs(c, args, "startDate", "unit", "amount", "timezone")
		if err != nil || null {
			return nullValue, err
		}
		start, err := toTime(vals["startDate"])
		if err != nil {
			return missing, mongoerr.New(5166403, "%s requires startDate to be convertible to a date", name)
		}
		if vals["unit"].Type != bson.TypeString {
			return missing, mongoerr.New(5166404, "%s expects string defining the time unit", name)
		}
		unit, err := parseTimeUnit(name, vals["unit"])
		if err != nil {
			return missing, err
		}
		amount, ok := integral(vals["amount"])
		if !ok || (vals["amount"].Type != bson.TypeInt32 && vals["amount"].Type != bson.TypeInt64 && math.Abs(asFloat(vals["amount"])) >= 0x1p63) {
			return missing, mongoerr.New(5166405, "%s expects integer amount of time units", name)
		}
		if name == "$dateSubtract" {
			amount = -amount
		}
		loc := time.UTC
		if tz, ok := vals["timezone"]; ok {
			if loc, err = parseTimezone(tz); err != nil {
				return missing, err
			}
		}
		return vTime(addTime(start.In(loc), unit, amount)), nil
	}}, nil
}

func addTime(t time.Time, unit string, n int64) time.Time {
	switch unit {
	case "year":
		return addMonths(t, n*12)
	case "quarter":
		return addMonths(t, n*3)
	case "month":
		return addMonths(t, n)
	case "week":
		return t.AddDate(0, 0, int(n*7))
	case "day":
		return t.AddDate(0, 0, int(n))
	case "hour":
		return t.Add(time.Duration(n) * time.Hour)
	case "minute":
		return t.Add(time.Duration(n) * time.Minute)
	case "second":
		return t.Add(time.Duration(n) * time.Second)
	}
	return t.Add(time.Duration(n) * time.Millisecond)
}

// addMonths moves t by n calendar months, ending on the last day of the
// target month when t's day does not exist there.
func addMonths(t time.Time, n int64) time.Time {
	y, m, d := t.Date()
	total := int64(y)*12 + int64(m-1) + n
	years := floorDiv(total, 12)
	ny, nm := int(years), time.Month(total-years*12+1)
	last := time.Date(ny, nm+1, 0, 0, 0, 0, 0, t.Location()).Day()
	hh, mm, ss := t.Clock()
	return time.Date(ny, nm, min(d, last), hh, mm, ss, t.Nanosecond(), t.Location())
}

// compileDateDiff compiles {$dateDiff: {startDate, endDate, unit,
// timezone, startOfWeek}}: the number of unit boundaries crossed from
// startDate to endDate, in the timezone, as a long.
func compileDateDiff(arg bson.RawValue, vars scope) (expr, error) {
	const name = "$dateDiff"
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(5166301, "$dateDiff only supports an object as its argument")
	}
	args, err := dateArgs(name, arg, vars, 5166302, "startDate", "endDate", "unit", "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	switch {
	case args["startDate"] == nil:
		return nil, mongoerr.New(5166303, "Missing 'startDate' parameter to $dateDiff")
	case args["endDate"] == nil:
		return nil, mongoerr.New(5166304, "Missing 'endDate' parameter to $dateDiff")
	case args["unit"] == nil:
		return nil, mongoerr.New(5166305, "Missing 'unit' parameter to $dateDiff")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		vals, null, err := evalArgs(c, args, "startDate", "endDate", "unit", "timezone", "startOfWeek")
		if err != nil || null {
			return nullValue, err
		}
		var ts [2]time.Time
		for i, f := range []string{"startDate", "endDate"} {
			if ts[i], err = toTime(vals[f]); err != nil {
				return missing, mongoerr.New(5166307, "$dateDiff requires '%s' to be a date, but got %s", f, typeName(vals[f].Type))
			}
		}
		unit, err := parseTimeUnit(name, vals["unit"])
		if err != nil {
			return missing, err
		}
		loc := time.UTC
		if tz, ok := vals["timezone"]; ok {
			if loc, err = parseTimezone(tz); err != nil {
				return missing, err
			}
		}
		weekStart := time.Sunday
		if v, ok := vals["startOfWeek"]; ok && unit == "week" {
			if v.Type != bson.TypeString {
				return missing, mongoerr.New(5439015, "$dateDiff requires 'startOfWeek' to be a string, but got %s", typeName(v.Type))
			}
			d, ok := parseWeekday(str(v))
			if !ok {
				return missing, mongoerr.New(5439016, "$dateDiff parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", str(v))
			}
			weekStart = d
		}
		a, b := ts[0].In(loc), ts[1].In(loc)
		return vInt64(unitIndex(b, unit, weekStart) - unitIndex(a, unit, weekStart)), nil
	}}, nil
}

// unitIndex numbers the unit periods of local time t so that the
// difference of two indexes counts the boundaries crossed between them.
func unitIndex(t time.Time, unit string, weekStart time.Weekday) int64 {
	y, m, d := t.Date()
	_, off := t.Zone()
	local := t.UnixMilli() + int64(off)*1000 // milliseconds of the local wall clock
	days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
	switch unit {
	case "year":
		return int64(y)
	case "quarter":
		return int64(y)*4 + int64(m-1)/3
	case "month":
		return int64(y)*12 + int64(m-1)
	case "week":
		// 1970-01-01 was a Thursday; shift so weeks start on weekStart.
		shift := (int64(time.Thursday) - int64(weekStart) + 7) % 7
		return floorDiv(days+shift, 7)
	case "day":
		return days
	case "hour":
		return floorDiv(local, 3_600_000)
	case "minute":
		return floorDiv(local, 60_000)
	case "second":
		return floorDiv(local, 1000)
	}
	return t.UnixMilli()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// parseWeekday reads a day of the week as mongod does: the full English
// name or its three-letter abbreviation, in any case.
func parseWeekday(s string) (time.Weekday, bool) {
	s = strings.ToLower(s)
	for d := time.Sunday; d <= time.Saturday; d++ {
		full := strings.ToLower(d.String())
		if s == full || s == full[:3] {
			return d, true
		}
	}
	return 0, false
}

// compileDateTrunc compiles {$dateTrunc: {date, unit, binSize, timezone,
// startOfWeek}}: the start of the bin of binSize units holding date, bins
// counted in the timezone from 2000-01-01 (weeks from the first
// startOfWeek on or after it).
func compileDateTrunc(arg bson.RawValue, vars scope) (expr, error) {
	const name = "$dateTrunc"
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(5439007, "$dateTrunc only supports an object as its argument")
	}
	args, err := dateArgs(name, arg, vars, 5439008, "date", "unit", "binSize", "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	switch {
	case args["date"] == nil:
		return nil, mongoerr.New(5439009, "Missing 'date' parameter to $dateTrunc")
	case args["unit"] == nil:
		return nil, mongoerr.New(5439010, "Missing 'unit' parameter to $dateTrunc")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		vals, null, err := evalArgs(c, args, "date", "unit", "binSize", "timezone", "startOfWeek")
		if err != nil || null {
			return nullValue, err
		}
		t, err := toTime(vals["date"])
		if err != nil {
			return missing, mongoerr.New(5439012, "$dateTrunc requires 'date' to be a date, but got %s", typeName(vals["date"].Type))
		}
		unit, err := parseTimeUnit(name, vals["unit"])
		if err != nil {
			return missing, err
		}
		bin := int64(1)
		if v, ok := vals["binSize"]; ok {
			n, ok := integral(v)
			if !ok || (v.Type == bson.TypeDouble || v.Type == bson.TypeDecimal128) && math.Abs(asFloat(v)) >= 0x1p63 {
				return missing, mongoerr.New(5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '%s' of type %s", shortString(v), typeName(v.Type))
			}
			if n <= 0 {
				return missing, mongoerr.New(5439018, "$dateTrunc requires 'binSize' to be greater than 0, but got value %d", n)
			}
			bin = n
		}
		loc := time.UTC
		if tz, ok := vals["timezone"]; ok {
			if loc, err = parseTimezone(tz); err != nil {
				return missing, err
			}
		}
		weekStart := time.Sunday
		if v, ok := vals["startOfWeek"]; ok && unit == "week" {
			if v.Type != bson.TypeString {
				return missing, mongoerr.New(5439015, "$dateTrunc requires 'startOfWeek' to be a string, but got %s", typeName(v.Type))
			}
			d, ok := parseWeekday(str(v))
			if !ok {
				return missing, mongoerr.New(5439016, "$dateTrunc parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", str(v))
			}
			weekStart = d
		}
		return vTime(truncTime(t.In(loc), unit, bin, weekStart)), nil
	}}, nil
}

func truncTime(t time.Time, unit string, bin int64, weekStart time.Weekday) time.Time {
	loc := t.Location()
	y, m, d := t.Date()
	switch unit {
	case "year", "quarter", "month":
		per := map[string]int64{"year": 12, "quarter": 3, "month": 1}[unit] * bin
		months := floorDiv(int64(y-2000)*12+int64(m-1), per) * per
		years := floorDiv(months, 12)
		return time.Date(2000+int(years), time.Month(months-years*12+1), 1, 0, 0, 0, 0, loc)
	case "week", "day":
		days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()/86400 - 10957 // days since 2000-01-01
		per := bin
		if unit == "week" {
			// 2000-01-01 was a Saturday: weeks start on the first
			// weekStart on or after it.
			days -= (int64(weekStart) - int64(time.Saturday) + 7) % 7
			per = 7 * bin
		}
		start := floorDiv(days, per) * per
		if unit == "week" {
			start += (int64(weekStart) - int64(time.Saturday) + 7) % 7
		}
		return time.Date(2000, 1, 1+int(start), 0, 0, 0, 0, loc)
	}
	ms := map[string]int64{"hour": 3_600_000, "minute": 60_000, "second": 1000, "millisecond": 1}[unit] * bin
	// Whole units of the local wall clock, counted from 2000-01-01 there.
	_, off := t.Zone()
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	local := t.UnixMilli() + int64(off)*1000 - ref
	trunc := floorDiv(local, ms)*ms + ref - int64(off)*1000
	return time.UnixMilli(trunc).In(loc)
}

// compileDateToString compiles {$dateToString: {date, format, timezone, onNull}}.
func compileDateToString(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(18629, "$dateToString only supports an object as its argument")
	}
	var dateE, formatE, tzE, onNullE expr
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		switch string(k) {
		case "date":
			dateE = e
		case "format":
			formatE = e
		case "timezone":
			tzE = e
		case "onNull":
			onNullE = e
		default:
			return nil, mongoerr.New(18534, "Unrecognized argument to $dateToString: %s", k)
		}
	}
	if dateE == nil {
		return nil, mongoerr.New(18628, "Missing 'date' parameter to $dateToString")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		format := "%Y-%m-%dT%H:%M:%S.%LZ"
		if formatE != nil {
			f, err := formatE.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(f) {
				return nullValue, nil
			}
			if f.Type != bson.TypeString {
				return missing, mongoerr.New(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", typeName(f.Type), shortString(f))
			}
			format = str(f)
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
		d, err := dateE.eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(d) {
			if onNullE != nil {
				return onNullE.eval(c)
			}
			return nullValue, nil
		}
		var t time.Time
		switch d.Type {
		case bson.TypeDateTime:
			t = time.UnixMilli(asInt64(d))
		case bson.TypeTimestamp:
			sec, _ := d.Timestamp()
			t = time.Unix(int64(sec), 0)
		case bson.TypeObjectID:
			t = d.ObjectID().Timestamp()
		default:
			return missing, mongoerr.New(16006, "can't convert from BSON type %s to Date", typeName(d.Type))
		}
		out, err := formatDate(format, t.In(loc))
		if err != nil {
			return missing, err
		}
		return vString(out), nil
	}}, nil
}

// parseTimezone accepts an Olson name or a UTC offset (+hh, +hhmm, +hh:mm).
func parseTimezone(v bson.RawValue) (*time.Location, error) {
	if v.Type != bson.TypeString {
		return nil, mongoerr.New(40517, "timezone must evaluate to a string, found %s", typeName(v.Type))
	}
	s := str(v)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		digits := strings.ReplaceAll(s[1:], ":", "")
		if len(digits) == 2 {
			digits += "00"
		}
		if len(digits) == 4 && strings.Trim(digits, "0123456789") == "" {
			h := int(digits[0]-'0')*10 + int(digits[1]-'0')
			m := int(digits[2]-'0')*10 + int(digits[3]-'0')
			off := h*3600 + m*60
			if s[0] == '-' {
				off = -off
			}
			return time.FixedZone(s, off), nil
		}
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, mongoerr.New(40485, "unrecognized time zone identifier: \"%s\"", s)
	}
	return loc, nil
}

// formatDate renders t with $dateToString's format specifiers.
func formatDate(format string, t time.Time) (string, error) {
	var b strings.Builder
	pad := func(n, width int) {
		s := strings.Repeat("0", width) + itoa(n)
		b.WriteString(s[len(s)-max(width, len(itoa(n))):])
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			return "", mongoerr.New(18535, "Unmatched '%%' at end of format string")
		}
		i++
		switch format[i] {
		case 'Y':
			pad(t.Year(), 4)
		case 'G':
			y, _ := t.ISOWeek()
			pad(y, 4)
		case 'm':
			pad(int(t.Month()), 2)
		case 'd':
			pad(t.Day(), 2)
		case 'H':
			pad(t.Hour(), 2)
		case 'M':
			pad(t.Minute(), 2)
		case 'S':
			pad(t.Second(), 2)
		case 'L':
			pad(t.Nanosecond()/1e6, 3)
		case 'j':
			pad(t.YearDay(), 3)
		case 'w':
			pad(int(t.Weekday())+1, 1)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			pad(wd, 1)
		case 'U':
			pad((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'V':
			_, w := t.ISOWeek()
			pad(w, 2)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			b.WriteRune(sign)
			pad(off/3600, 2)
			pad(off%3600/60, 2)
		case 'Z':
			_, off := t.Zone()
			b.WriteString(itoa(off / 60))
		case '%':
			b.WriteByte('%')
		default:
			return "", mongoerr.New(18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return b.String(), nil
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
