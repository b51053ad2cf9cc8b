package nats

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestSeveralNamespaces publishes records of several collections, in two
// databases, interleaved: each lands on its own subject, in order, and a
// consumer filtered on one subject sees exactly that collection's records.
func TestSeveralNamespaces(t *testing.T) {
	srv := testenv.NATS(t)
	nss := []string{"shop.orders", "shop.customers", "crm.leads", "shop.with.dot"}
	subjects := map[string]string{
		"shop.orders": "cdc.shop.orders", "shop.customers": "cdc.shop.customers",
		"crm.leads": "cdc.crm.leads", "shop.with.dot": "cdc.shop.with.dot",
	}
	s := openSink(t, Config{Pipeline: "multi", Servers: []string{srv.ClientURL()}, Stream: "CDC", CreateStream: &StreamSpec{}})
	rs := records(0, 40)
	for i := range rs {
		rs[i].Namespace = nss[i%len(nss)]
	}
	if err := putCommit(t, s, rs); err != nil {
		t.Fatal(err)
	}

	nc := connectTo(t, srv.ClientURL())
	st := streamMsgs(t, nc, "CDC")
	for seq := uint64(1); seq <= 40; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ns := nss[(seq-1)%uint64(len(nss))]
		if m.Subject != subjects[ns] || string(m.Data) != fmt.Sprintf(`{"n":%d}`, seq-1) || m.Header.Get("Tide-Namespace") != ns {
			t.Fatalf("stream seq %d: %s %q (namespace %s), want %s {\"n\":%d}", seq, m.Subject, m.Data, m.Header.Get("Tide-Namespace"), subjects[ns], seq-1)
		}
	}
	for ns, subject := range subjects {
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.State.Subjects[subject]; got != 10 {
			t.Errorf("subject %s (namespace %s) holds %d messages, want 10", subject, ns, got)
		}
	}
}
