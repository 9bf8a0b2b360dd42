package main

import "io"

// IOStreams are the streams a command reads and writes; tests pass buffers.
// (planner-search's iostreams.go defines the same type; keep one.)
type IOStreams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}
