//go:build unix

package mongowire_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used: client
// and server alike, since both run in it. Contention from other processes
// moves it far less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
