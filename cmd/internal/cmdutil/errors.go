package cmdutil

import (
	"errors"
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/urfave/cli/v2"
)

// InputError marks bad input: the CLI exits 2 for it.
type InputError struct {
	Msg string
	// Err, when set, is the error Msg says, for errors.As.
	Err error
}

func (e *InputError) Error() string { return e.Msg }

func (e *InputError) Unwrap() error { return e.Err }

func InputErrorf(format string, a ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, a...)}
}

// ExitFor maps errors to exit codes: 2 for bad input, 3 for a job that
// does not fit the cluster, 1 otherwise.
func ExitFor(err error) error {
	if err == nil {
		return nil
	}
	var ue *InputError
	var nf *search.NoFitError
	switch {
	case errors.As(err, &ue):
		return cli.Exit("pipette-launch: "+err.Error(), ExitInput)
	case errors.As(err, &nf):
		return cli.Exit("pipette-launch: "+err.Error(), ExitNoFit)
	}
	return cli.Exit("pipette-launch: "+err.Error(), ExitFailure)
}

// Exit codes (README "Exit codes"): 0 ok, 1 job or host failure, 2 bad
// input, 3 the job does not fit the cluster.
const (
	ExitFailure = 1
	ExitInput   = 2
	ExitNoFit   = 3
)

// UsageError is bad input: the CLI exits 2.
func UsageError(format string, a ...any) error { return cli.Exit(fmt.Sprintf(format, a...), 2) }

func AsInputError(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Msg: err.Error()}
}

// CheckIntFlag is bad input unless --name's value v is from lo to hi.
func CheckIntFlag(name string, v, lo, hi int) error {
	if err := limits.CheckInt(int64(v), int64(lo), int64(hi)); err != nil {
		return InputErrorf("--%s %d: %v", name, v, err)
	}
	return nil
}

// CheckNumberFlag is bad input unless --name's value v is finite and
// inside r (internal/limits; docs/usage.md's table states each range).
func CheckNumberFlag(name string, v float64, r limits.Range) error {
	if err := r.Check(v); err != nil {
		return InputErrorf("--%s: %v", name, err)
	}
	return nil
}
