package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is the one PostgreSQL server of a test binary, started on first
// use by Postgres and stopped by StopPostgres.
var pgServer struct {
	once    sync.Once
	mu      sync.Mutex // guards the fields below
	dir     string     // temporary directory: data and sockets
	bin     string     // directory of initdb and pg_ctl
	runAs   []string   // command prefix to run as the postgres user when root
	port    int
	err     error // why the server could not start
	missing bool  // no PostgreSQL binaries: skip unless required
}

// Postgres returns the DSN of a fresh, empty database (user postgres,
// password PostgresPassword) on the test binary's PostgreSQL server, which it starts on
// first use: initdb into a temporary directory (trust on Unix sockets,
// scram-sha-256 over TCP) and pg_ctl start on a free
// 127.0.0.1 port. The database is dropped when the test ends. Call
// StopPostgres from TestMain to stop the server.
//
// Without PostgreSQL binaries (pg_config --bindir, /usr/lib/postgresql/*/bin
// or PATH) the test is skipped, or fails in CI: see Need.
func Postgres(t testing.TB) (dsn string) {
	t.Helper()
	pgServer.once.Do(startPostgres)
	pgServer.mu.Lock()
	port, err, missing := pgServer.port, pgServer.err, pgServer.missing
	pgServer.mu.Unlock()
	if missing {
		Need(t, "postgres", fmt.Errorf("%w (install Debian's postgresql package)", err))
	}
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}

	name := "t_" + randomHex(8)
	admin := postgresDSN(port, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("connect to drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return postgresDSN(port, name)
}

// StopPostgres stops the server started by Postgres, if any, and removes
// its directory. Call it from TestMain after m.Run.
func StopPostgres() {
	pgServer.mu.Lock()
	defer pgServer.mu.Unlock()
	if pgServer.dir == "" {
		return
	}
	data := filepath.Join(pgServer.dir, "data")
	if pgServer.port != 0 {
		_ = pgCommand(pgServer.runAs, filepath.Join(pgServer.bin, "pg_ctl"), "stop", "-D", data, "-m", "immediate", "-w").Run()
	}
	_ = os.RemoveAll(pgServer.dir)
	pgServer.dir, pgServer.port = "", 0
}

// PostgresPassword is the password of the test server's postgres user.
const PostgresPassword = "tide-test"

func postgresDSN(port int, db string) string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", PostgresPassword, port, db)
}

func startPostgres() {
	pgServer.mu.Lock()
	defer pgServer.mu.Unlock()
	bin, err := postgresBinDir()
	if err != nil {
		pgServer.err, pgServer.missing = err, true
		return
	}
	pgServer.bin = bin
	if err := startPostgresLocked(); err != nil {
		pgServer.err = err
		if pgServer.dir != "" {
			_ = os.RemoveAll(pgServer.dir)
			pgServer.dir = ""
		}
	}
}

func startPostgresLocked() error {
	dir, err := os.MkdirTemp("", "tide-pg-")
	if err != nil {
		return err
	}
	pgServer.dir = dir
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, and initdb refuses root: need a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return fmt.Errorf("running as root: need runuser to start PostgreSQL as postgres: %w", err)
		}
		pgServer.runAs = []string{runuser, "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	// Unix sockets trust; TCP needs the password, so that tests can
	// check how a wrong one is reported.
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(PostgresPassword+"\n"), 0o644); err != nil {
		return err
	}
	initdb := pgCommand(pgServer.runAs, filepath.Join(pgServer.bin, "initdb"),
		"-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// The server is disposable: no fsync keeps tests fast. Tests that kill
	// a process kill tide, never the server, so nothing relies on it.
	opts := strings.Join([]string{
		"-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
	}, " ")
	start := pgCommand(pgServer.runAs, filepath.Join(pgServer.bin, "pg_ctl"),
		"start", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o", opts)
	if out, err := start.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	pgServer.port = port
	return nil
}

func pgCommand(prefix []string, name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), prefix...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir() // a directory the postgres user may enter
	return cmd
}

// postgresBinDir finds the directory of initdb and pg_ctl.
func postgresBinDir() (string, error) {
	var tried []string
	has := func(dir string) bool {
		tried = append(tried, dir)
		for _, b := range []string{"initdb", "pg_ctl"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // newest version first, roughly
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if has(dir) {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) in " + strings.Join(tried, ", ") + " or PATH")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
