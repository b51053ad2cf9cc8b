//go:build unix

package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// permissionChildEnv makes TestPermissionDeniedChild read the checkpoint
// in the directory it names and print the error.
const permissionChildEnv = "TIDE_CHECKPOINT_TEST_PERMISSION_DIR"

// savedUnreadable saves a checkpoint for pipeline "p" in a new directory
// and makes the file unreadable to anyone but root.
func savedUnreadable(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Save(context.Background(), "p", cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	path = File(dir, "p")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// wantPermissionMessage requires msg to say that path has a permission
// problem, with its owner and mode, and not to advise a reset.
func wantPermissionMessage(t *testing.T, msg, path string) {
	t.Helper()
	owner := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		owner = u.Username + " (" + owner + ")"
	}
	for _, want := range []string{path, "permission denied", "permission problem", "owned by " + owner, "mode ----------", "chmod"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "corrupt") || strings.Contains(msg, "reset it") || strings.Contains(msg, "reset -f") {
		t.Errorf("message advises a reset for a permission problem:\n%s", msg)
	}
}

// The message is built from the file's real owner and mode, for a real
// *fs.PathError with EACCES (what open returns to a user who may not read
// the file; root, which the tests may run as, is never refused).
func TestPermissionErrorNamesOwnerAndMode(t *testing.T) {
	_, path := savedUnreadable(t)
	pe := &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	err := permissionError(path, pe)
	if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, syscall.EACCES) {
		t.Errorf("error %v does not match fs.ErrPermission and EACCES", err)
	}
	wantPermissionMessage(t, err.Error(), path)
}

// Read of a checkpoint the process may not read says it is a permission
// problem. As root, the test runs Read in a child process as nobody,
// since root bypasses file permissions.
func TestReadPermissionDenied(t *testing.T) {
	dir, path := savedUnreadable(t)
	if os.Getuid() != 0 {
		_, err := Read(dir, "p")
		if err == nil {
			t.Fatal("Read of a mode 000 checkpoint succeeded")
		}
		var ce *CorruptError
		if errors.As(err, &ce) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Read error %v: want a permission error, not a CorruptError", err)
		}
		wantPermissionMessage(t, err.Error(), path)
		return
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("running as root and there is no user nobody to be refused: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// nobody must reach the test binary and the directory, not the file.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "checkpoint.test")
	copyFile(t, exe, bin, 0o755)
	// Open up only the test's own temporary directories; their parents
	// must already let others through.
	for _, d := range []string{dir, filepath.Dir(dir), filepath.Dir(bin)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p := filepath.Dir(filepath.Dir(dir)); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("running as root, and nobody cannot reach the temporary directory through %s (mode %s)", p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestPermissionDeniedChild$", "-test.v")
	cmd.Env = append(os.Environ(), permissionChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
	msg := string(out)
	if !strings.Contains(msg, "READ ERROR: ") {
		t.Fatalf("child as nobody did not report a Read error:\n%s", msg)
	}
	for _, want := range []string{path, "permission denied", "permission problem", "owned by root (uid 0)", "mode ----------", "tide runs as nobody"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "corrupt") || strings.Contains(msg, "reset -f") {
		t.Errorf("message advises a reset for a permission problem:\n%s", msg)
	}
}

// TestPermissionDeniedChild is TestReadPermissionDenied's child: it reads
// the checkpoint as the user it was started as and prints the error.
func TestPermissionDeniedChild(t *testing.T) {
	dir := os.Getenv(permissionChildEnv)
	if dir == "" {
		t.Skip("runs only as TestReadPermissionDenied's child process")
	}
	_, err := Read(dir, "p")
	if err == nil {
		t.Fatal("Read succeeded")
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Read error is not a permission error: %v", err)
	}
	t.Logf("READ ERROR: %v", err)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}
