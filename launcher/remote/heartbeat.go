package remote

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Stdin is what Heartbeat needs of a started session: its stdin and its
// end. *Session satisfies it.
type Stdin interface {
	WriteStdin(p []byte) error
	Done() <-chan struct{}
}

// Heartbeat keeps one host's agent and us in touch while its session
// lasts. Five times per timeout it writes a byte to the agent's stdin (its
// watchdog stops the ranks after a silence of the timeout) and asks sshd
// for a reply; a host that has answered nothing for the timeout is lost:
// its connection is closed, so its session ends, and the supervisor stops
// the job everywhere else and names it. A network cut sends neither a FIN
// nor a RST, so without this both sides would wait for TCP's keepalive.
func Heartbeat(c *Conn, sess Stdin, timeout time.Duration) {
	every := max(timeout/5, 100*time.Millisecond)
	// Monotonic: a wall-clock step must not look like silence.
	base := time.Now()
	var heard atomic.Int64 // since base
	// One writer, fed without blocking: a write stuck on a dead network
	// must not delay the loss check.
	beats := make(chan struct{}, 1)
	go func() {
		for range beats {
			if sess.WriteStdin([]byte{'\n'}) != nil {
				return
			}
		}
	}()
	defer close(beats)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-sess.Done():
			return
		case <-c.Lost():
			return
		case <-t.C:
		}
		select {
		case beats <- struct{}{}:
		default:
		}
		go func() {
			if err := <-c.sendKeepalive(); err == nil {
				heard.Store(int64(time.Since(base)))
			}
		}()
		if silent := time.Since(base) - time.Duration(heard.Load()); silent > timeout {
			c.markLost(fmt.Errorf("%w: nothing heard from the host for %s (--heartbeat-timeout %s)", ErrConnLost, silent.Round(100*time.Millisecond), timeout))
			c.client.Close()
			return
		}
	}
}
