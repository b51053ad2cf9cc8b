package mql

import "testing"

// Date parts in their three argument forms. 2021-01-01 is a Friday: in
// week 0 (weeks start on the year's first Sunday) and ISO week 53 of
// 2020. Answers from the MongoDB 7.0 manual pages of each operator.
func TestDateParts(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"d": {"$date": "2021-01-01T23:30:05.123Z"}, "s": {"$date": "2021-03-07T00:00:00Z"}, "tz": "-05:00"}`)
	tests := map[string]struct{ expr, want string }{
		"year":             {`{"$year": "$d"}`, `2021`},
		"year array":       {`{"$year": ["$d"]}`, `2021`},
		"year expr doc":    {`{"$year": {"$add": ["$d", 3600000]}}`, `2021`},
		"hour timezone":    {`{"$hour": {"date": "$d", "timezone": "$tz"}}`, `18`},
		"hour offset":      {`{"$hour": {"date": "$d", "timezone": "+01:00"}}`, `0`},
		"day in timezone":  {`{"$dayOfMonth": {"date": "$d", "timezone": "+0100"}}`, `2`},
		"millisecond":      {`{"$millisecond": "$d"}`, `123`},
		"dayOfWeek":        {`{"$dayOfWeek": "$d"}`, `6`},
		"isoDayOfWeek":     {`{"$isoDayOfWeek": "$d"}`, `5`},
		"isoDayOfWeek sun": {`{"$isoDayOfWeek": "$s"}`, `7`},
		"week":             {`{"$week": "$d"}`, `0`},
		"week sunday":      {`{"$week": "$s"}`, `10`},
		"isoWeek":          {`{"$isoWeek": "$d"}`, `53`},
		"isoWeekYear":      {`{"$isoWeekYear": "$d"}`, `2020`},
		"dayOfYear":        {`{"$dayOfYear": "$s"}`, `66`},
		"null date":        {`{"$year": "$nope"}`, `null`},
		"null timezone":    {`{"$year": {"date": "$d", "timezone": "$nope"}}`, `null`},
		"objectId":         {`{"$year": {"$toObjectId": "5f0000000000000000000000"}}`, `2020`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tt.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			if w := val(t, tt.want); got.Type != w.Type || !Equal(got, w) {
				t.Fatalf("got %s, want %s", got, w)
			}
		})
	}
	errs := map[string]struct {
		expr string
		code int32
		msg  string
	}{
		"unknown option": {`{"$year": {"date": "$d", "tz": "UTC"}}`, 40535, `unrecognized option to $year: "tz"`},
		"missing date":   {`{"$month": {"timezone": "UTC"}}`, 40539, ""},
		"two in array":   {`{"$week": ["$d", "$d"]}`, 40536, "$week accepts exactly one argument if given an array, but was given 2"},
		"not a date":     {`{"$year": "$tz"}`, 16006, "can't convert from BSON type string to Date"},
		"bad timezone":   {`{"$year": {"date": "$d", "timezone": "Mars/Base"}}`, 40485, ""},
	}
	for name, tt := range errs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tt.expr))
			if err == nil {
				_, err = e.Eval(root)
			}
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}
