// Package syncbuf is a bytes.Buffer that concurrent writers (a launch's
// per-host output streams) and a polling reader (a test) can share.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
