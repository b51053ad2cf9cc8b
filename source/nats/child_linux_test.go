package nats

import "syscall"

// childAttr makes a child process die with the test binary, so that a
// killed or timed-out test leaves no nats-server holding its port.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
