package postgres

import "strings"

// moveTyped moves the rows of a renamed collection's typed table into
// the new name's typed table, column by field path; plan gave the target
// the columns it lacked, widened those it could, and made its _id jsonb
// if the keys differ in type. A column whose values the target's column
// of that path cannot take (another type, a pin, the column cap) moves
// them into the row's _tide_overflow, as a write would. Rows the batch
// deleted in the target after the rename stay deleted, as in moveRows.
func moveTyped(from, to *table) string {
	fl, tl := from.typed.pending, to.typed.pending
	key := "f._id"
	if fl.key != tl.key {
		key = keyToJSON(fl.key, "f._id") // plan made the target's jsonb
	}
	var dst, src, set strings.Builder
	overflow := "f._tide_overflow"
	for _, c := range fl.cols {
		tc := tl.byPath[pathKey(c.path)]
		col := "f." + quote(c.name)
		if tc == nil || !movesInto(c, tc) {
			if c.kind != kTimestamp { // a timestamp's exact value is in the overflow already
				overflow = overflowSet(overflow, c.path, col, columnToJSON(c.kind, col))
			}
			continue
		}
		dst.WriteString(", " + quote(tc.name))
		src.WriteString(", " + col)
	}
	for _, tc := range tl.cols {
		set.WriteString(quote(tc.name) + " = excluded." + quote(tc.name) + ", ")
	}
	return `INSERT INTO ` + to.sql.table + ` AS t (_id` + dst.String() + `, _tide_overflow, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
	SELECT ` + key + src.String() + `, ` + overflow + `, f._tide_op, f._tide_cluster_time, f._tide_deleted, f._tide_synced_at FROM ` + from.sql.table + ` AS f
	WHERE f._tide_cluster_time <= $1
	AND NOT EXISTS (SELECT 1 FROM pg_temp.` + to.typed.stageNow() + ` AS s WHERE s.del AND s._id = ` + key + ` AND s.ct > $1)
	ON CONFLICT (_id) DO UPDATE SET ` + set.String() + `_tide_overflow = excluded._tide_overflow, _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = excluded._tide_deleted, _tide_synced_at = now()
	WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
}

// movesInto reports whether the values of column c go into column tc
// as they are, or cast without loss.
func movesInto(c, tc *tcol) bool {
	if tc.pin != nil && tc.pin.precision > 0 {
		return false // numeric(p,s) would round
	}
	if c.kind == tc.kind {
		return tc.pin == nil || c.pin == nil || tc.pin.typ == c.pin.typ
	}
	switch c.kind {
	case kInt32:
		return tc.kind == kInt64 || tc.kind == kNumeric || tc.kind == kDouble
	case kInt64:
		return tc.kind == kNumeric
	}
	return false
}

// overflowSet returns the SQL of overflow with the value js at path, where
// col is not NULL.
func overflowSet(overflow string, path []string, col, js string) string {
	out := `coalesce(` + overflow + `, '{}'::jsonb)`
	for i := 1; i < len(path); i++ { // make the objects on the way
		p := pgTextArray(path[:i])
		out = `jsonb_set(` + out + `, ` + literal(p) + `, coalesce(` + out + ` #> ` + literal(p) + `, '{}'::jsonb), true)`
	}
	out = `jsonb_set(` + out + `, ` + literal(pgTextArray(path)) + `, ` + js + `, true)`
	return `CASE WHEN ` + col + ` IS NULL THEN ` + overflow + ` ELSE ` + out + ` END`
}

// literal quotes s as an SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// columnToJSON is the SQL of a typed column's value as the relaxed
// Extended JSON a write puts in _tide_overflow.
func columnToJSON(k kind, col string) string {
	switch k {
	case kOID:
		return `jsonb_build_object('$oid', ` + col + `)`
	case kDouble, kNumeric:
		return `CASE WHEN ` + col + ` IN ('NaN', 'Infinity', '-Infinity') THEN jsonb_build_object('$numberDouble', ` + col + `::text) ELSE to_jsonb(` + col + `) END`
	case kDate:
		return `jsonb_build_object('$date', jsonb_build_object('$numberLong', (extract(epoch FROM ` + col + `) * 1000)::bigint::text))`
	case kUUID:
		return `jsonb_build_object('$binary', jsonb_build_object('base64', encode(uuid_send(` + col + `), 'base64'), 'subType', '04'))`
	case kBytes:
		return `jsonb_build_object('$binary', jsonb_build_object('base64', translate(encode(` + col + `, 'base64'), E'\n', ''), 'subType', '00'))`
	case kJSON:
		return col
	}
	return `to_jsonb(` + col + `)`
}

// planRenames gives the new name's typed table of each rename the
// columns of the old one that it lacks, and widens its integer columns
// where the old one's are wider.
func (s *Sink) planRenames(ddl []string) []string {
	for _, op := range s.stage.colls {
		from, to := s.tables[op.tbl], s.tables[op.to]
		if !op.rename || from.absent || from.typed == nil || to.typed == nil {
			continue
		}
		if fk, tk := from.typed.pending.key, to.typed.pending.key; fk != tk && tk != kJSON {
			l := to.typed.own()
			l.key, l.keyBSON = kJSON, "mixed"
			ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ALTER COLUMN _id TYPE jsonb USING `+keyToJSON(tk, "_id"))
			to.typed.records = append(to.typed.records, colRecord{column: "_id", path: []string{"_id"}, bson: from.typed.pending.keyBSON, pgType: "jsonb",
				decision: "widened", note: "keys of renamed " + from.name + " moved in"})
		}
		for _, c := range from.typed.pending.cols {
			tc := to.typed.pending.byPath[pathKey(c.path)]
			switch {
			case tc == nil:
				if to.typed.pending.full() {
					continue // moveTyped puts its values in _tide_overflow
				}
				l := to.typed.own()
				tc = l.add(c.path, c.kind, c.pin, c.bson)
				ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ADD COLUMN IF NOT EXISTS `+quote(tc.name)+` `+tc.sqlType())
				to.typed.records = append(to.typed.records, colRecord{column: tc.name, path: tc.path, bson: tc.bson, pgType: tc.sqlType(),
					decision: "added", note: "moved from renamed " + from.name})
			case tc.pin == nil && tc.kind != c.kind && c.pin == nil && widensTo(tc.kind, c.kind):
				l := to.typed.own()
				tc = l.byPath[pathKey(c.path)]
				tc.kind = c.kind
				ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ALTER COLUMN `+quote(tc.name)+` TYPE `+c.kind.pgType())
				to.typed.records = append(to.typed.records, colRecord{column: tc.name, path: tc.path, bson: c.bson, pgType: c.kind.pgType(),
					decision: "widened", note: "moved from renamed " + from.name})
			}
		}
		if to.typed.pending != to.typed.layout && to.typed.stageFor != to.typed.pending {
			ddl = s.remakeStage(to, ddl)
		}
	}
	return ddl
}

// widensTo reports whether a column of kind from widens to kind to.
func widensTo(from, to kind) bool {
	switch from {
	case kInt32:
		return to == kInt64 || to == kNumeric
	case kInt64:
		return to == kNumeric
	}
	return false
}
