//go:build !linux

package nats

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
