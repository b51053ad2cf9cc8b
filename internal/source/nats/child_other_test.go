//go:build !linux

package natssource

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
