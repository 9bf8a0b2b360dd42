package launcher

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/templates"
)

// The agent is a POSIX sh script uploaded to each host and started as
//
//	exec setsid -w /bin/sh AGENT
//
// so it leads a new session and process group: killing -PGID stops every
// rank on the host (OpenSSH refuses signal requests for root, so this is the
// only reliable way). Its stdout carries, line by line:
//
//	@@pipette-NONCE clock NS        the host's clock (date +%s%N), first
//	@@pipette-NONCE pgid PGID       first, before any rank starts
//	@@pipette-NONCE wd PID          the watchdog's pid (own group)
//	RANK <output line>              every line a rank writes (stdout+stderr)
//	RANK @@pipette-NONCE exit RANK CODE NS  when a rank ends (after its
//	                                output); NS is the host's clock
//	                                (date +%s%N) when it ended
//	@@pipette-NONCE done            when all ranks have ended
//
// The nonce keeps a rank's own output from faking control lines. A
// watchdog in its own session waits for EOF on the agent's stdin, which
// happens when the SSH session ends for any reason (launcher killed), or,
// with a heartbeat timeout, for a silence that long on it (the launcher
// writes a byte every fraction of it; a network cut sends no EOF, and
// sshd would notice only after TCP's keepalive, hours later); it then stops
// the group itself (TERM, KILL after the grace period), so a lost launcher
// leaves nothing running.

// agentScript renders the agent for one host; heartbeat is the silence on
// stdin, in seconds, after which the watchdog stops the ranks (0: only EOF).
func agentScript(h templates.HostJob, workDir, nonce string, grace, heartbeat int) string {
	var b strings.Builder
	tag := "@@pipette-" + nonce
	q := shellquote.Quote
	fmt.Fprintf(&b, "#!/bin/sh\n# pipette-launch agent for host %s (generated; started by pipette-launch run)\n", oneLine(h.Name))
	fmt.Fprintf(&b, "T=%s\nWD=%s\nG=%d\nHB=%d\n", q(tag), q(workDir), grace, heartbeat)
	b.WriteString(`exec 3<&0 </dev/null
# Before anything starts: a work directory that cannot be made is a start
# failure of this host, not a rank failure.
mkdir -p "$WD" || { echo "pipette-launch: cannot create work directory $WD" >&2; exit 96; }
[ "$HB" -gt 0 ] && ! command -v timeout >/dev/null 2>&1 && { echo "pipette-launch: timeout (coreutils) is needed on $(uname -n) for --heartbeat-timeout" >&2; exit 95; }
echo "$T clock $(date +%s%N)"
echo "$T pgid $$"
PG=$$
# Kill takes "-SIG -PGID" (no "--": dash's kill rejects it).
# Watchdog: own session, so stopping the group does not stop it first.
# Without a heartbeat it waits with the read builtin, not cat: killing the
# watchdog shell then leaves no child behind. With one, each byte is read
# under timeout --foreground, which stays in the watchdog's group (so it
# dies with it); no byte within the timeout, or EOF, ends the wait.
setsid /bin/sh -c '
  alive() { ps -e -o pgid= -o stat= | awk -v g="$1" '"'"'$1 == g && $2 !~ /^Z/ {f=1} END {exit !f}'"'"'; }
  if [ "$3" -gt 0 ]; then
    while [ "$(timeout --foreground "$3" dd bs=1 count=1 2>/dev/null <&3 | wc -c)" -eq 1 ]; do :; done
  else
    while IFS= read -r _; do :; done <&3
  fi
  alive "$1" || exit 0
  kill -TERM -$1 2>/dev/null
  i=0
  while alive "$1" && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL -$1 2>/dev/null
' pipette-watchdog "$PG" "$G" "$HB" >/dev/null 2>&1 &
WDP=$!
exec 3<&-
echo "$T wd $WDP"
S=$(mktemp -d "${TMPDIR:-/tmp}/pipette-status.XXXXXX") || exit 98
# tagged prefixes each line with the rank, then reports the rank's exit
# code and the host's clock when it ended, which its pipeline left in $S:
# only once the rank's output has ended, so the exit line comes after its
# last line even without a final newline.
tagged() {
  r=$1
  while IFS= read -r l || [ -n "$l" ]; do
    printf '%s %s\n' "$r" "$l"
  done
  printf '%s %s exit %s %s\n' "$r" "$T" "$r" "$(cat "$S/$r" 2>/dev/null || echo 255)"
}
P=
`)
	for _, r := range h.Ranks {
		// Only the rank takes SIGTERM: the shell that records its status
		// and the reader that forwards its output ignore it, so on a
		// graceful stop the rank's last lines still arrive (no EPIPE while
		// it checkpoints) and its exit status is reported; KILL after the
		// grace period still ends them all.
		fmt.Fprintf(&b, "{ trap '' TERM; ( trap - TERM; cd \"$WD\" && exec %s ) </dev/null 2>&1; echo \"$? $(date +%%s%%N)\" >\"$S/%d\"; } | { trap '' TERM; tagged %d; } &\nP=\"$P $!\"\n",
			rankCommand(r), r.Rank, r.Rank)
	}
	b.WriteString(`# The agent, too, outlives a TERM to the group: it reports the ranks' exits.
trap '' TERM
wait $P
rm -rf "$S"
# End the watchdog (by group and by pid, in case it has not reached its
# setsid yet) and reap it, so nothing of ours outlives "done".
kill -KILL -"$WDP" 2>/dev/null
kill -KILL "$WDP" 2>/dev/null
wait "$WDP" 2>/dev/null
# Stop whatever the ranks left behind in the group (daemonised children):
# TERM, then KILL after the grace period. Members are listed from a check in
# its own session, so its ps and awk are not members; the agent and the
# check's parent (a command substitution's subshell) are left out, and the
# agent must survive to exit 0 after "done".
leftovers() {
  setsid -w /bin/sh -c 'ps -e -o pgid= -o pid= -o stat= |
    awk -v g="$1" -v p="$PPID" '"'"'$1 == g && $2 != g && $2 != p && $3 !~ /^Z/ {print $2}'"'"'' pipette-sweep "$PG"
}
trap '' TERM
if [ -n "$(leftovers)" ]; then
  kill -TERM -$PG 2>/dev/null
  i=0
  while [ -n "$(leftovers)" ] && [ $i -lt $((G * 10)) ]; do sleep 0.1; i=$((i+1)); done
  for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done
fi
echo "$T done"
# The private directory the agent was started from (agentStartCommand);
# only a path of exactly that shape is removed.
case "$0" in
*/pipette-agent.??????/agent.sh) rm -rf "${0%/agent.sh}" ;;
esac
exit 0
`)
	return b.String()
}

// rankCommand is env K=V ... argv, every word quoted.
func rankCommand(r templates.RankJob) string {
	words := []string{"env"}
	for _, e := range r.Env {
		words = append(words, e.Name+"="+e.Value)
	}
	words = append(words, templates.EnvSafeArgv(r.Argv)...)
	return shellquote.Join(words)
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// withRestartEnv returns ranks' env with the torchrun restart variables set.
func withRestartEnv(env []templates.EnvVar, restart, maxRestarts int) []templates.EnvVar {
	set := map[string]string{
		"TORCHELASTIC_RESTART_COUNT": strconv.Itoa(restart),
		"TORCHELASTIC_MAX_RESTARTS":  strconv.Itoa(maxRestarts),
	}
	out := make([]templates.EnvVar, 0, len(env)+len(set))
	for _, e := range env {
		if v, ok := set[e.Name]; ok {
			e.Value = v
			delete(set, e.Name)
		}
		out = append(out, e)
	}
	for _, n := range []string{"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"} {
		if v, ok := set[n]; ok {
			out = append(out, templates.EnvVar{Name: n, Value: v})
		}
	}
	return out
}
