package launch

import (
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// The agent is the host's launch script, the very one --output-dir writes
// (job.HostScript), with run's control lines in front
// (job.WithControl). It is uploaded to each host and started as
//
//	exec setsid -w /bin/sh AGENT
//
// so it leads a new session and process group; each rank leads a session
// of its own. Its stdout carries, line by line:
//
//	@@pipette-NONCE clock NS        the host's clock (date +%s%N), first
//	@@pipette-NONCE pgid PGID       before any rank starts
//	@@pipette-NONCE wd PID          the watchdog's pid (own group)
//	RANK <output line>              every line a rank writes (stdout+stderr)
//	RANK @@pipette-NONCE exit RANK CODE NS BY  when a rank ends (after its
//	                                output): NS the host's clock then, BY 1
//	                                when the agent had begun stopping ranks
//	@@pipette-NONCE ranks PGID...   the ranks' process groups, once started
//	@@pipette-NONCE killer PID      once it stops ranks: its KILL-timer's session
//	@@pipette-NONCE left PGID...    before done, when something of the ranks'
//	                                sessions or its helpers outlived 10 s
//	@@pipette-NONCE files-removed   before done, once it removed the job's
//	                                files (its watchdog stopped the ranks)
//	@@pipette-NONCE done            when all ranks (and what they left) ended
//
// The nonce keeps a rank's own output from faking control lines. TERM to
// the agent's group stops every rank (TERM, KILL after the grace). A
// watchdog in its own session waits for EOF on the agent's stdin, which
// happens when the SSH session ends for any reason (launcher killed), or,
// with a heartbeat timeout, for a silence that long on it (the launcher
// writes a byte every fraction of it; a network cut sends no EOF, and sshd
// would notice only after TCP's keepalive, hours later); it then stops the
// ranks itself, so a lost launcher leaves nothing running. Then, over SSH
// and locally, it removes the job's files directory too (job.Control's
// RemoveFiles): a host whose connection is lost is not dialled again, and
// its agent is all that is left there to clean up. The launcher uploads the
// files again for each restart.

// agentScript renders the agent for host i of job; heartbeat is the silence
// on stdin, in seconds, after which the watchdog stops the ranks (0: only
// EOF); removeFiles, when not "", is the command that removes the job's
// files once the watchdog has stopped the ranks (see job.Control).
func agentScript(j job.Job, i int, nonce string, grace, heartbeat, restart int, removeFiles string) (string, error) {
	j.LogDir = "" // the launcher keeps the logs, here
	script, err := job.HostScript(&j, i)
	if err != nil {
		return "", err
	}
	return job.WithControl(script, job.Control{Tag: "@@pipette-" + nonce, Grace: grace,
		Heartbeat: heartbeat, Restart: restart, RemoveFiles: removeFiles}), nil
}

// withRestartEnv returns ranks' env with the torchrun restart variables set.
func withRestartEnv(env []job.EnvVar, restart, maxRestarts int) []job.EnvVar {
	set := map[string]string{
		"TORCHELASTIC_RESTART_COUNT": strconv.Itoa(restart),
		"TORCHELASTIC_MAX_RESTARTS":  strconv.Itoa(maxRestarts),
	}
	out := make([]job.EnvVar, 0, len(env)+len(set))
	for _, e := range env {
		if v, ok := set[e.Name]; ok {
			e.Value = v
			delete(set, e.Name)
		}
		out = append(out, e)
	}
	for _, n := range []string{"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"} {
		if v, ok := set[n]; ok {
			out = append(out, job.EnvVar{Name: n, Value: v})
		}
	}
	return out
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
