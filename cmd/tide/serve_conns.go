package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/mongowire"
)

// connCollector exports the server's connection counters: the limits of
// --max-connections, --max-connections-per-ip, --auth-timeout and
// --max-unauthenticated-connections at work.
type connCollector struct{ srv *mongowire.Server }

var (
	connCurrentDesc = prometheus.NewDesc("tide_mongowire_connections",
		"Client connections being served.", nil, nil)
	connUnauthDesc = prometheus.NewDesc("tide_mongowire_connections_unauthenticated",
		"Client connections being served that have not authenticated (with --auth).", nil, nil)
	connRefusedDesc = prometheus.NewDesc("tide_mongowire_connections_refused_total",
		"Connections closed at accept, by reason: max_connections (every connection authenticated), max_connections_per_ip.", []string{"reason"}, nil)
	connClosedDesc = prometheus.NewDesc("tide_mongowire_connections_closed_total",
		"Unauthenticated connections closed, by reason: auth_timeout (not authenticated within --auth-timeout), "+
			"max_unauthenticated (the least recently active one, to make room for a new connection past "+
			"--max-unauthenticated-connections or --max-connections).", []string{"reason"}, nil)
)

func (connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connCurrentDesc
	ch <- connUnauthDesc
	ch <- connRefusedDesc
	ch <- connClosedDesc
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.ConnStats()
	ch <- prometheus.MustNewConstMetric(connCurrentDesc, prometheus.GaugeValue, float64(st.Current))
	ch <- prometheus.MustNewConstMetric(connUnauthDesc, prometheus.GaugeValue, float64(st.Unauthenticated))
	ch <- prometheus.MustNewConstMetric(connRefusedDesc, prometheus.CounterValue, float64(st.RefusedMaxConnections), "max_connections")
	ch <- prometheus.MustNewConstMetric(connRefusedDesc, prometheus.CounterValue, float64(st.RefusedPerIP), "max_connections_per_ip")
	ch <- prometheus.MustNewConstMetric(connClosedDesc, prometheus.CounterValue, float64(st.ClosedAuthTimeout), "auth_timeout")
	ch <- prometheus.MustNewConstMetric(connClosedDesc, prometheus.CounterValue, float64(st.ClosedUnauthenticated), "max_unauthenticated")
}
