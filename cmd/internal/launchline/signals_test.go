package launchline

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalsToHandle: torchrun's --signals-to-handle (and its
// underscored spelling, and PET_SIGNALS_TO_HANDLE) adds the signals it
// lists beyond the four that always stop a job; a name that is no
// catchable stop signal is refused, naming the flag and the name.
func TestSignalsToHandle(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want []os.Signal
		err  string
	}{
		{"not given", nil, "", nil, ""},
		{"torchrun's default", []string{"--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"}, "", nil, ""},
		{"Slurm's preemption signal", []string{"--signals_to_handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"}, "", []os.Signal{syscall.SIGUSR1}, ""},
		{"spaces and repeats", []string{"--signals-to-handle", " SIGUSR2, SIGUSR1 ,SIGUSR2,"}, "", []os.Signal{syscall.SIGUSR2, syscall.SIGUSR1}, ""},
		{"from PET_SIGNALS_TO_HANDLE", nil, "SIGUSR1", []os.Signal{syscall.SIGUSR1}, ""},
		{"a typo", []string{"--signals-to-handle", "SIGTERM,SIGUSR3"}, "", nil, `--signals-to-handle "SIGTERM,SIGUSR3": "SIGUSR3" is not a signal that can stop the job; want a comma-separated list of SIGALRM,`},
		{"lower case, which Python's signal module lacks too", []string{"--signals-to-handle", "sigusr1"}, "", nil, `"sigusr1" is not a signal`},
		{"SIGKILL cannot be caught", []string{"--signals-to-handle", "SIGKILL"}, "", nil, `"SIGKILL" is not a signal that can stop the job`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("PET_SIGNALS_TO_HANDLE", tc.env)
			}
			l, err := readLine(t, append(tc.args, "train.py")...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(l.StopSignals, tc.want) {
				t.Fatalf("StopSignals %v, %v; want %v", l.StopSignals, err, tc.want)
			}
			if len(tc.args) > 0 && l.Style != StyleTorchrun {
				t.Errorf("style %q: --signals-to-handle is torchrun's alone", l.Style)
			}
		})
	}
}

// TestShutdownTimeout: torchrun's --shutdown-timeout N (seconds), from the
// flag, PET_SHUTDOWN_TIMEOUT or TORCH_ELASTIC_SHUTDOWN_TIMEOUT as torchrun
// reads them; 0 and below are refused.
func TestShutdownTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
		err  string
	}{
		{"not given", nil, nil, 0, ""},
		{"flag", []string{"--shutdown-timeout", "45"}, nil, 45 * time.Second, ""},
		{"underscored", []string{"--shutdown_timeout=5"}, nil, 5 * time.Second, ""},
		{"torchrun's variable", nil, map[string]string{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "20"}, 20 * time.Second, ""},
		{"PET_ beats TORCH_ELASTIC_", nil, map[string]string{"PET_SHUTDOWN_TIMEOUT": "7", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "20"}, 7 * time.Second, ""},
		{"the flag beats both", []string{"--shutdown-timeout", "3"}, map[string]string{"PET_SHUTDOWN_TIMEOUT": "7"}, 3 * time.Second, ""},
		{"zero", []string{"--shutdown-timeout", "0"}, nil, 0, "--shutdown-timeout 0: want the seconds ranks get between SIGTERM and SIGKILL, at least 1"},
		{"past a time.Duration", []string{"--shutdown-timeout", "9223372037"}, nil, 0, "--shutdown-timeout 9223372037: want the seconds ranks get between SIGTERM and SIGKILL, at most 9223372036"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			l, err := readLine(t, append(tc.args, "train.py")...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || l.ShutdownTimeout != tc.want {
				t.Fatalf("ShutdownTimeout %s, %v; want %s", l.ShutdownTimeout, err, tc.want)
			}
		})
	}
}

// TestNewerTorchrunFlagsIgnored: torchrun's --event-log-handler and
// --logs-specs (newer than the torch here) are accepted, with the warning
// that says why they do nothing.
func TestNewerTorchrunFlagsIgnored(t *testing.T) {
	l, err := readLine(t, "--event-log-handler", "console", "--logs_specs=per_cycle", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Ignored, []string{"--event-log-handler", "--logs-specs"}) || l.Style != StyleTorchrun {
		t.Fatalf("ignored %v (style %q), want both flags as torchrun's", l.Ignored, l.Style)
	}
	for i, want := range []string{"no torchelastic event handler is loaded", "no torchrun.logs_specs plugin is loaded"} {
		if !strings.Contains(l.IgnoredWhy[i], want) {
			t.Errorf("%s: why %q lacks %q", l.Ignored[i], l.IgnoredWhy[i], want)
		}
	}
}

// TestNodeRankAboveZeroRefused: a per-node line's copy for node 1 and up
// would start the whole job again; node rank 0's (or none) goes on, with
// --node-rank ignored.
func TestNodeRankAboveZeroRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		err  string
	}{
		{"none", nil, "", ""},
		{"node 0", []string{"--node_rank", "0"}, "", ""},
		{"node 1", []string{"--node-rank=1"}, "", "--node-rank 1 (or PET_NODE_RANK): pipette-launch starts every host of the job itself"},
		{"a PyTorchJob pod's PET_NODE_RANK", nil, "3", "this is node 3's copy of a line meant to run on every node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("PET_NODE_RANK", tc.env)
			}
			_, err := readLine(t, append(tc.args, "train.py")...)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
