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

// $dateAdd, $dateSubtract and $dateDiff, with answers from the MongoDB
// 7.0 manual's examples (month ends clamp; $dateDiff counts boundaries).
func TestDateArithmetic(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"jan31": {"$date": "2021-01-31T10:00:00Z"}, "feb29": {"$date": "2020-02-29T00:00:00Z"}, "a": {"$date": "2020-12-31T23:59:59Z"}, "b": {"$date": "2021-01-01T00:00:01Z"}, "sat": {"$date": "2021-01-02T12:00:00Z"}, "mon": {"$date": "2021-01-04T12:00:00Z"}}`)
	tests := map[string]struct{ expr, want string }{
		"add month clamps":   {`{"$dateAdd": {"startDate": "$jan31", "unit": "month", "amount": 1}}`, `{"$date": "2021-02-28T10:00:00Z"}`},
		"add year leap":      {`{"$dateAdd": {"startDate": "$feb29", "unit": "year", "amount": 1}}`, `{"$date": "2021-02-28T00:00:00Z"}`},
		"add quarter":        {`{"$dateAdd": {"startDate": "$jan31", "unit": "quarter", "amount": 1}}`, `{"$date": "2021-04-30T10:00:00Z"}`},
		"add hours":          {`{"$dateAdd": {"startDate": "$jan31", "unit": "hour", "amount": 15}}`, `{"$date": "2021-02-01T01:00:00Z"}`},
		"add week":           {`{"$dateAdd": {"startDate": "$jan31", "unit": "week", "amount": 2}}`, `{"$date": "2021-02-14T10:00:00Z"}`},
		"add millis long":    {`{"$dateAdd": {"startDate": "$b", "unit": "millisecond", "amount": {"$numberLong": "-1000"}}}`, `{"$date": "2021-01-01T00:00:00Z"}`},
		"add day in zone":    {`{"$dateAdd": {"startDate": "$jan31", "unit": "day", "amount": 1, "timezone": "+05:00"}}`, `{"$date": "2021-02-01T10:00:00Z"}`},
		"subtract month":     {`{"$dateSubtract": {"startDate": "$jan31", "unit": "month", "amount": 2}}`, `{"$date": "2020-11-30T10:00:00Z"}`},
		"subtract over year": {`{"$dateSubtract": {"startDate": "$jan31", "unit": "month", "amount": 13}}`, `{"$date": "2019-12-31T10:00:00Z"}`},
		"add null amount":    {`{"$dateAdd": {"startDate": "$jan31", "unit": "day", "amount": null}}`, `null`},
		"add missing start":  {`{"$dateAdd": {"startDate": "$nope", "unit": "day", "amount": 1}}`, `null`},
		"diff year":          {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "year"}}`, `{"$numberLong": "1"}`},
		"diff second":        {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "second"}}`, `{"$numberLong": "2"}`},
		"diff millisecond":   {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "millisecond"}}`, `{"$numberLong": "2000"}`},
		"diff day negative":  {`{"$dateDiff": {"startDate": "$b", "endDate": "$a", "unit": "day"}}`, `{"$numberLong": "-1"}`},
		"diff day in zone":   {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "+05:00"}}`, `{"$numberLong": "0"}`},
		"diff month":         {`{"$dateDiff": {"startDate": "$feb29", "endDate": "$jan31", "unit": "month"}}`, `{"$numberLong": "11"}`},
		"diff quarter":       {`{"$dateDiff": {"startDate": "$feb29", "endDate": "$jan31", "unit": "quarter"}}`, `{"$numberLong": "4"}`},
		"diff week sunday":   {`{"$dateDiff": {"startDate": "$sat", "endDate": "$mon", "unit": "week"}}`, `{"$numberLong": "1"}`},
		"diff week monday":   {`{"$dateDiff": {"startDate": "$sat", "endDate": "$mon", "unit": "week", "startOfWeek": "MON"}}`, `{"$numberLong": "1"}`},
		"diff week friday":   {`{"$dateDiff": {"startDate": "$sat", "endDate": "$mon", "unit": "week", "startOfWeek": "friday"}}`, `{"$numberLong": "0"}`},
		"diff null unit":     {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": null}}`, `null`},
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
		"add not object":    {`{"$dateAdd": 1}`, 5166400, "$dateAdd expects an object as its argument"},
		"add unknown":       {`{"$dateAdd": {"startDate": "$a", "unit": "day", "amount": 1, "x": 1}}`, 5166401, "Unrecognized argument to $dateAdd: x"},
		"add missing":       {`{"$dateSubtract": {"startDate": "$a", "unit": "day"}}`, 5166402, "$dateSubtract requires startDate, unit, and amount to be present"},
		"add not date":      {`{"$dateAdd": {"startDate": 5, "unit": "day", "amount": 1}}`, 5166403, "$dateAdd requires startDate to be convertible to a date"},
		"add unit type":     {`{"$dateAdd": {"startDate": "$a", "unit": 1, "amount": 1}}`, 5166404, "$dateAdd expects string defining the time unit"},
		"add unit unknown":  {`{"$dateAdd": {"startDate": "$a", "unit": "days", "amount": 1}}`, 9, "unknown time unit value: days"},
		"add amount frac":   {`{"$dateAdd": {"startDate": "$a", "unit": "day", "amount": 1.5}}`, 5166405, "$dateAdd expects integer amount of time units"},
		"diff not object":   {`{"$dateDiff": "x"}`, 5166301, "$dateDiff only supports an object as its argument"},
		"diff unknown":      {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "x": 1}}`, 5166302, "Unrecognized argument to $dateDiff: x"},
		"diff no start":     {`{"$dateDiff": {"endDate": "$b", "unit": "day"}}`, 5166303, "Missing 'startDate' parameter to $dateDiff"},
		"diff no end":       {`{"$dateDiff": {"startDate": "$b", "unit": "day"}}`, 5166304, "Missing 'endDate' parameter to $dateDiff"},
		"diff no unit":      {`{"$dateDiff": {"startDate": "$a", "endDate": "$b"}}`, 5166305, "Missing 'unit' parameter to $dateDiff"},
		"diff not date":     {`{"$dateDiff": {"startDate": "$a", "endDate": "x", "unit": "day"}}`, 5166307, "$dateDiff requires 'endDate' to be a date, but got string"},
		"diff unit type":    {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": 3}}`, 5439013, "$dateDiff requires 'unit' to be a string, but got int"},
		"diff week day":     {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "week", "startOfWeek": "funday"}}`, 5439016, "$dateDiff parameter 'startOfWeek' value cannot be recognized as a day of a week: funday"},
		"diff week type":    {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "week", "startOfWeek": 1}}`, 5439015, "$dateDiff requires 'startOfWeek' to be a string, but got int"},
		"diff bad timezone": {`{"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "Nowhere/Land"}}`, 40485, ""},
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

// $dateTrunc: the manual's example (2020-05-18T14:10:30Z in two-week bins
// starting on Mondays, Los Angeles time, is 2020-05-11T07:00:00Z) with a
// fixed offset for that day, and bins counted from 2000-01-01.
func TestDateTrunc(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"d": {"$date": "2020-05-18T14:10:30.250Z"}}`)
	tests := map[string]struct{ expr, want string }{
		"two weeks monday": {`{"$dateTrunc": {"date": "$d", "unit": "week", "binSize": 2, "timezone": "-07:00", "startOfWeek": "Monday"}}`, `{"$date": "2020-05-11T07:00:00Z"}`},
		"week sunday":      {`{"$dateTrunc": {"date": "$d", "unit": "week"}}`, `{"$date": "2020-05-17T00:00:00Z"}`},
		"month":            {`{"$dateTrunc": {"date": "$d", "unit": "month"}}`, `{"$date": "2020-05-01T00:00:00Z"}`},
		"quarter":          {`{"$dateTrunc": {"date": "$d", "unit": "quarter"}}`, `{"$date": "2020-04-01T00:00:00Z"}`},
		"two years":        {`{"$dateTrunc": {"date": "$d", "unit": "year", "binSize": 2}}`, `{"$date": "2020-01-01T00:00:00Z"}`},
		"three years":      {`{"$dateTrunc": {"date": "$d", "unit": "year", "binSize": 3}}`, `{"$date": "2018-01-01T00:00:00Z"}`},
		"day":              {`{"$dateTrunc": {"date": "$d", "unit": "day", "timezone": "+05:00"}}`, `{"$date": "2020-05-17T19:00:00Z"}`},
		"two hours offset": {`{"$dateTrunc": {"date": "$d", "unit": "hour", "binSize": 2, "timezone": "+05:30"}}`, `{"$date": "2020-05-18T12:30:00Z"}`},
		"15 minutes":       {`{"$dateTrunc": {"date": "$d", "unit": "minute", "binSize": 15}}`, `{"$date": "2020-05-18T14:00:00Z"}`},
		"second":           {`{"$dateTrunc": {"date": "$d", "unit": "second"}}`, `{"$date": "2020-05-18T14:10:30Z"}`},
		"null binSize":     {`{"$dateTrunc": {"date": "$d", "unit": "day", "binSize": null}}`, `null`},
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
		"not object":   {`{"$dateTrunc": 1}`, 5439007, "$dateTrunc only supports an object as its argument"},
		"unknown":      {`{"$dateTrunc": {"date": "$d", "unit": "day", "x": 1}}`, 5439008, "Unrecognized argument to $dateTrunc: x"},
		"no date":      {`{"$dateTrunc": {"unit": "day"}}`, 5439009, "Missing 'date' parameter to $dateTrunc"},
		"no unit":      {`{"$dateTrunc": {"date": "$d"}}`, 5439010, "Missing 'unit' parameter to $dateTrunc"},
		"not date":     {`{"$dateTrunc": {"date": 1, "unit": "day"}}`, 5439012, "$dateTrunc requires 'date' to be a date, but got int"},
		"unit type":    {`{"$dateTrunc": {"date": "$d", "unit": 1}}`, 5439013, "$dateTrunc requires 'unit' to be a string, but got int"},
		"binSize frac": {`{"$dateTrunc": {"date": "$d", "unit": "day", "binSize": 1.5}}`, 5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '1.5' of type double"},
		"binSize zero": {`{"$dateTrunc": {"date": "$d", "unit": "day", "binSize": 0}}`, 5439018, "$dateTrunc requires 'binSize' to be greater than 0, but got value 0"},
		"weekday":      {`{"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "x"}}`, 5439016, ""},
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
