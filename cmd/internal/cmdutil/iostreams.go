package cmdutil

import "io"

// IOStreams are the streams a command reads and writes; tests pass buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}
