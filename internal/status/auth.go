package status

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// credentials is the one user of an --http-auth-file.
type credentials struct {
	user   string
	secret string // the password, or its bcrypt hash
	bcrypt bool
}

// readAuthFile reads an auth file: exactly one "user:password" line, where
// a password that starts with $2a$, $2b$ or $2y$ is a bcrypt hash (as made
// by htpasswd -nbB). Blank lines and lines starting with # are ignored.
func readAuthFile(path string) (*credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--http-auth-file: %w", err)
	}
	var c *credentials
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if c != nil {
			return nil, fmt.Errorf("--http-auth-file %s: line %d: want exactly one user:password line", path, n)
		}
		user, secret, ok := strings.Cut(line, ":")
		if !ok || user == "" || secret == "" {
			return nil, fmt.Errorf("--http-auth-file %s: line %d: want user:password (or user:bcrypt-hash)", path, n)
		}
		c = &credentials{user: user, secret: secret}
		if strings.HasPrefix(secret, "$2a$") || strings.HasPrefix(secret, "$2b$") || strings.HasPrefix(secret, "$2y$") {
			if _, err := bcrypt.Cost([]byte(secret)); err != nil {
				return nil, fmt.Errorf("--http-auth-file %s: line %d: not a valid bcrypt hash: %w", path, n, err)
			}
			c.bcrypt = true
		}
	}
	if c == nil {
		return nil, fmt.Errorf("--http-auth-file %s: no user:password line", path)
	}
	return c, nil
}

// ok reports whether user and password match, in time that does not
// depend on where they differ.
func (c *credentials) ok(user, password string) bool {
	u1, u2 := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(c.user))
	userOK := subtle.ConstantTimeCompare(u1[:], u2[:]) == 1
	var passOK bool
	if c.bcrypt {
		passOK = bcrypt.CompareHashAndPassword([]byte(c.secret), []byte(password)) == nil
	} else {
		p1, p2 := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(c.secret))
		passOK = subtle.ConstantTimeCompare(p1[:], p2[:]) == 1
	}
	return userOK && passOK
}

// basicAuth wraps h so that every request needs the credentials.
func basicAuth(c *credentials, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || !c.ok(user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="tide", charset="UTF-8"`)
			http.Error(w, "401 unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
