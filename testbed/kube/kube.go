package kube

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed scripts/*.sh
var scripts embed.FS

// The pinned versions: the cache key, and what build.sh builds.
const (
	Kubernetes  = "v1.34.4"
	Etcd        = "v3.6.16"
	JobSet      = "v0.12.0"
	Trainer     = "v2.2.0"
	KwokVersion = "v0.8.0"
	CoreDNS     = "v1.13.1"
)

// Binaries are what Build leaves in BinDir: the minimal set plus the
// Trainer controller, the kubelet and CoreDNS (real pods) and kubectl.
var Binaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "jobset-controller", "kwok",
	"trainer-controller-manager", "kubelet", "coredns", "kubectl"}

// Mode picks the nodes: fake ones (kwok), one real kubelet, or both.
type Mode string

// The modes up.sh knows.
const (
	Kwok    Mode = "kwok"
	Kubelet Mode = "kubelet"
	Both    Mode = "both"
)

// ParseMode reads a mode as the command line gives it.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Kwok, Kubelet, Both:
		return m, nil
	}
	return "", fmt.Errorf("kubernetes mode %q: want kwok (fake nodes), kubelet (one real node) or both", s)
}

// RealPods reports whether the mode runs the kubelet (containers really run).
func (m Mode) RealPods() bool { return m == Kubelet || m == Both }

// VersionKey names one set of pins: the cache directory of its binaries.
func VersionKey() string {
	return fmt.Sprintf("k8s-%s_etcd-%s_jobset-%s_kwok-%s_trainer-%s_coredns-%s", Kubernetes, Etcd, JobSet, KwokVersion, Trainer, CoreDNS)
}

// CacheRoot is where built stacks are kept, outside any repository:
// $PIPETTE_K8S_CACHE, else $XDG_CACHE_HOME/pipette-launch/k8s, else
// ~/.cache/pipette-launch/k8s.
func CacheRoot() string {
	if d := os.Getenv("PIPETTE_K8S_CACHE"); d != "" {
		return d
	}
	// os.UserCacheDir is $XDG_CACHE_HOME, else $HOME/.cache.
	base, err := os.UserCacheDir()
	if err != nil {
		base = "/root/.cache"
	}
	return filepath.Join(base, "pipette-launch", "k8s")
}

// BinDir holds the binaries of the pinned versions.
func BinDir() string { return filepath.Join(CacheRoot(), VersionKey(), "bin") }

// realPodsOnly are needed only where containers run (kubelet, both).
var realPodsOnly = map[string]bool{"kubelet": true, "coredns": true}

// Missing lists the binaries BinDir lacks (for any mode).
func Missing() []string { return missingFor(Both) }

// missingFor lists the binaries mode needs that BinDir lacks.
func missingFor(mode Mode) []string {
	var out []string
	for _, b := range Binaries {
		if realPodsOnly[b] && !mode.RealPods() {
			continue
		}
		if fi, err := os.Stat(filepath.Join(BinDir(), b)); err != nil || fi.Mode()&0o111 == 0 {
			out = append(out, b)
		}
	}
	return out
}

// Build builds every missing binary from the Go module proxy into BinDir
// (build.sh; about 13 minutes cold on 2 cores, under a minute with warm Go
// caches), at low CPU priority. It does nothing when BinDir is complete.
func Build(ctx context.Context, log io.Writer) error {
	if len(Missing()) == 0 {
		return nil
	}
	dir := filepath.Join(CacheRoot(), VersionKey())
	env := []string{"OUT=" + BinDir(), "W=" + filepath.Join(dir, "wrappers"), "PIPETTE_K8S_DIR=" + filepath.Join(dir, "build-state"),
		"K8S=" + strings.TrimPrefix(Kubernetes, "v"), "TRAINER=1", "REAL_PODS=1", "KUBECTL=1"}
	if err := runScript(ctx, "build.sh", nil, env, log, "nice", "-n", "10"); err != nil {
		return fmt.Errorf("build the kubernetes stack into %s: %w", BinDir(), err)
	}
	if m := Missing(); len(m) > 0 {
		return fmt.Errorf("build the kubernetes stack: %s still missing from %s", strings.Join(m, ", "), BinDir())
	}
	return nil
}

// DefaultStateDir is the stack's state (PKI, etcd data, logs, pids).
const DefaultStateDir = "/var/lib/pipette-testbed/kubernetes"

// LockFile is held by the process whose stack runs (fixed ports, bridge
// and node name: one stack per machine).
const LockFile = "/run/pipette-testbed-kubernetes.lock"

// Options say which stack Up starts.
type Options struct {
	Mode Mode
	// Dir is the state dir (default DefaultStateDir); no white space.
	Dir string
	// Log receives the scripts' progress lines (nil: discarded).
	Log io.Writer
	// Wait bounds how long Up waits for another process's stack to end
	// (0: do not wait).
	Wait time.Duration
}

// Stack is a running control plane.
type Stack struct {
	Mode Mode
	Dir  string
	// Kubeconfig authenticates as cluster admin (a static token).
	Kubeconfig string
	// Bin holds kubectl and the daemons.
	Bin  string
	lock *os.File
	log  io.Writer
}

// Up writes the configuration (setup.sh) and starts the stack (up.sh):
// a fresh, empty cluster every time. It fails when the binaries are not
// built, naming what to run.
func Up(ctx context.Context, o Options) (*Stack, error) {
	if m := missingFor(o.Mode); len(m) > 0 {
		return nil, fmt.Errorf("kubernetes stack not built (%s missing from %s): run `make deps` (or `pipette-testbed build --kubernetes`) first",
			strings.Join(m, ", "), BinDir())
	}
	if o.Dir == "" {
		o.Dir = DefaultStateDir
	}
	if strings.ContainsAny(o.Dir, " \t\n") {
		return nil, fmt.Errorf("kubernetes state dir %q: must not contain white space", o.Dir)
	}
	if o.Mode.RealPods() && os.Geteuid() != 0 {
		return nil, fmt.Errorf("kubernetes mode %s needs root (containerd, mounts, the pod bridge)", o.Mode)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	lock, err := acquire(ctx, o.Wait)
	if err != nil {
		return nil, err
	}
	s := &Stack{Mode: o.Mode, Dir: o.Dir, Kubeconfig: filepath.Join(o.Dir, "kubeconfig"), Bin: BinDir(), lock: lock, log: o.Log}
	if err := portsFree(); err != nil {
		s.release()
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		s.release()
		return nil, fmt.Errorf("kubernetes state dir: %w", err)
	}
	setupEnv := s.env()
	if o.Mode.RealPods() {
		setupEnv = append(setupEnv, "REAL_PODS=1")
	}
	if err := runScript(ctx, "setup.sh", nil, setupEnv, o.Log); err != nil {
		s.release()
		return nil, fmt.Errorf("kubernetes setup: %w", err)
	}
	if err := runScript(ctx, "up.sh", []string{string(o.Mode)}, s.env(), o.Log); err != nil {
		// up.sh may have started some daemons: stop them.
		_ = runScript(context.Background(), "down.sh", nil, s.env(), o.Log)
		s.release()
		return nil, fmt.Errorf("kubernetes up %s (logs in %s): %w", o.Mode, filepath.Join(o.Dir, "logs"), err)
	}
	return s, nil
}

// stackPorts are the fixed loopback ports the stack's daemons listen on
// (package doc, Addresses).
var stackPorts = []int{2379, 6443, 9443, 9444, 10250}

// portsFree fails when one of the stack's ports is taken although the lock
// was free: daemons left by a stack whose holder was killed (they run
// under `timeout`), which up.sh's health checks would take for its own.
func portsFree() error {
	for _, p := range stackPorts {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("kubernetes stack: 127.0.0.1:%d is in use although no stack holds %s (daemons left by a killed run?): run `pipette-testbed down --kubernetes`, or stop what listens there", p, LockFile)
		}
		l.Close()
	}
	return nil
}

// Down stops the stack and removes what it left (down.sh), then lets the
// next Up in.
func (s *Stack) Down(ctx context.Context) error {
	defer s.release()
	return DownDir(ctx, s.Dir, s.log)
}

// TestStateRoot holds the state dirs of the stacks tests start (New), one
// per test, named after it.
const TestStateRoot = DefaultStateDir + "-test"

// StateDirs is every state dir on this machine whose stack may still run:
// the default one and each test's, those with PID files left (up.sh writes
// them, down.sh removes them). A test killed by go test's -timeout panics
// past its Cleanup, leaving its daemons under its own dir.
func StateDirs() ([]string, error) {
	return stateDirsIn(DefaultStateDir, TestStateRoot)
}

func stateDirsIn(def, testRoot string) ([]string, error) {
	dirs := []string{def}
	tests, err := os.ReadDir(testRoot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("kubernetes test stacks: %w", err)
	}
	for _, e := range tests {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(testRoot, e.Name()))
		}
	}
	var left []string
	for _, d := range dirs {
		if pids, _ := filepath.Glob(filepath.Join(d, "run", "*.pid")); len(pids) > 0 {
			left = append(left, d)
		}
	}
	return left, nil
}

// DownAll stops every stack StateDirs finds, as `pipette-testbed down
// --kubernetes` does, and returns their state dirs.
func DownAll(ctx context.Context, log io.Writer) ([]string, error) {
	dirs, err := StateDirs()
	if err != nil {
		return nil, err
	}
	var stopped []string
	for _, d := range dirs {
		if err := DownDir(ctx, d, log); err != nil {
			return stopped, fmt.Errorf("%s: %w", d, err)
		}
		stopped = append(stopped, d)
	}
	return stopped, nil
}

// DownDir stops the stack whose state dir is dir (also one a crashed
// process left).
func DownDir(ctx context.Context, dir string, log io.Writer) error {
	if dir == "" {
		dir = DefaultStateDir
	}
	if log == nil {
		log = io.Discard
	}
	s := &Stack{Dir: dir, Bin: BinDir()}
	if err := runScript(ctx, "down.sh", nil, s.env(), log); err != nil {
		return fmt.Errorf("kubernetes down: %w", err)
	}
	return nil
}

// Env is what a kubectl needs to reach the stack: KUBECONFIG and the
// stack's kubectl first on PATH.
func (s *Stack) Env() []string {
	return append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "PATH="+s.Bin+":"+os.Getenv("PATH"))
}

// Kubectl runs the stack's kubectl with stdin, returning its stdout; the
// error carries stderr.
func (s *Stack) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.Bin, "kubectl"), append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

func (s *Stack) env() []string {
	return []string{"PIPETTE_K8S_DIR=" + s.Dir, "OUT=" + s.Bin}
}

func (s *Stack) release() {
	if s.lock != nil {
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		_ = s.lock.Close()
		s.lock = nil
	}
}

// acquire takes the machine-wide stack lock, waiting up to wait.
func acquire(ctx context.Context, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubernetes stack lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("kubernetes stack lock %s: %w", LockFile, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another kubernetes stack runs on this machine (lock %s held; fixed ports allow one): wait for it or run `pipette-testbed down --kubernetes`", LockFile)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runScript runs an embedded script with bash (through prefix, e.g. nice),
// its output to log; the error carries the output's last lines.
func runScript(ctx context.Context, name string, args, env []string, log io.Writer, prefix ...string) error {
	body, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		return err
	}
	argv := append(append(prefix, "bash", "-c", string(body), name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/local/go/bin:/usr/sbin:/sbin"), env...)
	var tail tailBuffer
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = io.MultiWriter(log, &tail)
	// Daemons started by up.sh run in the background holding no pipe of ours
	// (nohup with their own log files), so Wait returns when the script does.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, tail.String())
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }

// ImportImage builds image ref from this machine's installed Debian
// packages (with their dependencies and the tools the host script uses)
// and imports it into the kubelet's containerd; the tar is cached in
// CacheRoot/images keyed by ref and the packages' versions. Pods name it
// with imagePullPolicy Never or IfNotPresent: nothing can be pulled.
func (s *Stack) ImportImage(ctx context.Context, ref string, packages ...string) error {
	if !s.Mode.RealPods() {
		return fmt.Errorf("import image %s: the %s stack runs no containers", ref, s.Mode)
	}
	env := append(s.env(), "IMAGES="+filepath.Join(CacheRoot(), "images"))
	if err := runScript(ctx, "image.sh", append([]string{ref}, packages...), env, s.log); err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	return nil
}
