package main

import "io"

// IOStreams are the streams a command reads and writes; tests pass buffers.
// Temporary copy for the probe command until the CLI's shared
// iostreams.go lands (delete this file then).
type IOStreams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}
