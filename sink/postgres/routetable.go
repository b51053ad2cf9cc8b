package postgres

import (
	"fmt"
	"strings"

	"github.com/tide-cdc/tide/cdc"
)

// tableOfRoute is tableOf for a table template with {route}, filled by a
// route transform: a table per namespace and route.
func (s *Sink) tableOfRoute(rec *cdc.Record) (int, error) {
	if rec.Route == "" {
		return 0, fmt.Errorf("postgres sink: table %q for the record at position %s: the change has no route to fill {route}: a route transform sets it", s.cfg.Table, rec.Pos)
	}
	key := rec.Namespace + "\x00" + rec.Route
	if i, ok := s.byNS[key]; ok {
		s.tables[i].need(false)
		return i, nil
	}
	name, err := renderTable(strings.ReplaceAll(s.cfg.Table, "{route}", rec.Route), rec.Namespace)
	if err != nil {
		return 0, fmt.Errorf("postgres sink: table %q for the record at position %s: %w", s.cfg.Table, rec.Pos, err)
	}
	i, ok := s.byName[name]
	if !ok {
		i = len(s.tables)
		cfg := s.cfg
		cfg.Table = name
		s.tables = append(s.tables, &table{name: name, ns: rec.Namespace, sql: newStatementsFor(cfg, i)})
		s.byName[name] = i
	} else {
		s.tables[i].need(false)
	}
	s.byNS[key] = i
	return i, nil
}
