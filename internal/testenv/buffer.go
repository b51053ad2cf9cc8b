package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a child process's output copier, a
// logger's goroutines and the test may use at once. The zero value is
// ready to use.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
