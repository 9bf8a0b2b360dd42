package launch

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Signaled is the cause of a launch's context cancelled by a signal to
// pipette-launch (NotifyContext): the job's ranks get the same signal, as
// torchrun's agent passes on the one that stopped it.
type Signaled struct{ Signal syscall.Signal }

// Error reads as signal.NotifyContext's cause does ("interrupt signal
// received"): the summary of an interrupted job quotes it.
func (s Signaled) Error() string { return s.Signal.String() + " signal received" }

// Is makes a Signaled a context.Canceled, as signal.NotifyContext's cause
// is.
func (s Signaled) Is(target error) bool { return target == context.Canceled }

// NotifyContext is signal.NotifyContext with Signaled as the cause, so a
// stop knows which signal to pass on. After the first signal the others
// are still caught (a second ^C does not kill pipette-launch while it
// stops the ranks) until stop is called.
func NotifyContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(Signaled{Signal: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// stopSignalFor is the signal the stop after failure f sends the ranks:
// TERM after a failure of the job's own, stopSignal(ctx) after an
// interruption.
func stopSignalFor(ctx context.Context, f *JobFailure) string {
	if !f.interrupted {
		return "TERM"
	}
	return stopSignal(ctx)
}

// stopSignal is the signal a stop for ctx's end sends the ranks, by its
// shell name: the one that stopped pipette-launch, when one did and the
// host script passes it on (job.StopSignals), else TERM.
func stopSignal(ctx context.Context) string {
	var s Signaled
	if ctx.Err() == nil || !errors.As(context.Cause(ctx), &s) {
		return "TERM"
	}
	return job.StopSignalName(s.Signal)
}
