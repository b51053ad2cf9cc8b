package natsconn

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		servers []string
		auth    Auth
		tls     TLS
		want    []string // substrings; none for valid settings
	}{
		"defaults":       {},
		"token":          {servers: []string{"nats://a:4222", "nats://b:4222"}, auth: Auth{Token: "t"}},
		"bad server":     {servers: []string{"nats://a:4222", "nats://b 4222"}, want: []string{`servers[1]: "nats://b 4222" is not a server URL`}},
		"two kinds":      {auth: Auth{Token: "t", CredsFile: "c"}, want: []string{"auth: set only one of"}},
		"password alone": {auth: Auth{Password: "p"}, want: []string{"auth.user: required with a password"}},
		"cert alone":     {tls: TLS{CertFile: "c"}, want: []string{"tls: cert_file and key_file go together"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tc.servers, tc.auth, tc.tls)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("valid, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRedactServers(t *testing.T) {
	t.Parallel()
	got := RedactServers([]string{"nats://u:secret@h1:4222", "nats://h2:4222"})
	if strings.Contains(got, "secret") || !strings.Contains(got, "h1:4222") || !strings.Contains(got, "h2:4222") {
		t.Errorf("RedactServers = %q", got)
	}
}

func TestOptionsRefusesAMissingSeedFile(t *testing.T) {
	t.Parallel()
	if _, err := Options(Config{Auth: Auth{NKeySeedFile: t.TempDir() + "/missing.nk"}}); err == nil {
		t.Error("Options accepted a missing nkey seed file")
	}
}

func TestValidateHidesPasswords(t *testing.T) {
	t.Parallel()
	err := Validate([]string{"nats://u:sec ret@h1:4222"}, Auth{}, TLS{})
	if err == nil || strings.Contains(err.Error(), "sec ret") || strings.Contains(err.Error(), "ret@") {
		t.Errorf("Validate = %v: want an error without the password", err)
	}
}
