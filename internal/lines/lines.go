// Package lines reads text line by line with a bound on each line: the one
// way the project reads output and logs it does not control (ranks' logs,
// pods' logs), where one line can be megabytes (a progress bar without
// newlines, a printed tensor) and bufio.Scanner would stop at it with
// "token too long".
package lines

import (
	"bufio"
	"errors"
	"io"
)

// Each calls fn with each line of r, without its "\n" (and a "\r" before
// it). A line longer than max bytes is cut to its first max bytes, the
// rest read and dropped, and fn is told how many bytes were dropped: the
// reading goes on, and memory stays within max. A last line without a
// newline is a line. The slice is valid only during the call. The error is
// r's, never io.EOF.
func Each(r io.Reader, max int, fn func(line []byte, dropped int64)) error {
	br := bufio.NewReaderSize(r, max)
	for {
		line, err := br.ReadSlice('\n')
		var dropped int64
		if errors.Is(err, bufio.ErrBufferFull) {
			// line is the buffer's max bytes; copy it before reading on
			// through the rest of the line.
			line = append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				var more []byte
				more, err = br.ReadSlice('\n')
				dropped += int64(len(more))
			}
			if err == nil {
				dropped-- // the newline
			}
		}
		if len(line) > 0 || dropped > 0 {
			if dropped == 0 {
				line = trimEOL(line)
			}
			fn(line, dropped)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
