package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
)

// stateFile is the record, inside an instance directory, of everything the
// instance created. Down reads it, so cleanup works from another process.
const stateFile = "state.json"

// Instance indexes: k picks netns/link names and the 198.18.k.0/24 subnet.
// 0 is left to hand-made test-beds (testbed.md uses 198.18.0.0/24).
const (
	minIndex = 1
	maxIndex = 254
)

// owner identifies a process across pid reuse by its start time.
type owner struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// state is persisted as JSON after every change.
type state struct {
	Index   int       `json:"index"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Owner is nil for persistent instances (made by `pipette-testbed up`).
	Owner *owner `json:"owner,omitempty"`
	// Netns lists namespaces created, in creation order.
	Netns []string `json:"netns,omitempty"`
	// Links lists interfaces created in the root network namespace.
	Links []string `json:"links,omitempty"`
	// Sshd lists sshd processes started, one per host.
	Sshd []owner `json:"sshd,omitempty"`
	// Daemons lists the other processes started (munged, slurmctld, slurmd).
	Daemons []owner `json:"daemons,omitempty"`
	Hosts   []Host  `json:"hosts,omitempty"`
	Spec    Spec    `json:"spec"`
	Ready   bool    `json:"ready"`

	dir string
}

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.dir, stateFile), b, 0o600); err != nil {
		return fmt.Errorf("test-bed state: %w", err)
	}
	return nil
}

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("read test-bed state in %s: %w", dir, err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse test-bed state %s: %w", filepath.Join(dir, stateFile), err)
	}
	s.dir = dir
	return &s, nil
}

// processStartTime is field 22 of /proc/PID/stat (clock ticks since boot).
func processStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// comm (field 2) may hold spaces and parentheses: split after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func selfOwner() *owner {
	st, _ := processStartTime(os.Getpid())
	return &owner{Pid: os.Getpid(), StartTime: st}
}

// alive reports whether the process is still the one recorded (not dead,
// not a zombie, not a reused pid).
func (o owner) alive() bool {
	st, err := processStartTime(o.Pid)
	return err == nil && st == o.StartTime
}

// lockRoot takes an exclusive flock on the state root, serialising index
// allocation between processes (go test runs packages in parallel).
func lockRoot(root string) (unlock func(), err error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create test-bed state root %s: %w", root, err)
	}
	f, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open test-bed lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// nextIndexFile, in the state root, holds the index allocate tries first:
// the one after the last it handed out.
const nextIndexFile = ".next"

// nextIndex is where allocate starts looking (minIndex when the file is
// missing or holds no index). Allocating round the indices rather than
// from the lowest free one keeps a name just torn down (its netns, link
// and state directory, all named by the index) from being handed out again
// at once: the kernel removes a netns's devices after `ip netns del`
// returns, and whoever checks that an instance is gone (its tests, a user
// after `down`) would find a newer instance's objects under its names.
func nextIndex(root string) int {
	b, err := os.ReadFile(filepath.Join(root, nextIndexFile))
	if err != nil {
		return minIndex
	}
	k, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || k < minIndex || k > maxIndex {
		return minIndex
	}
	return k
}

// allocate picks a free instance index under the root lock, reclaiming
// instances whose owner process has died, and writes the initial state.
func allocate(spec Spec) (*state, error) {
	root := spec.stateRoot()
	unlock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Reclaim every abandoned instance, not only those below the first free
	// index: their sshd processes would otherwise run until `down --all`.
	busy := map[int]bool{}
	for k := minIndex; k <= maxIndex; k++ {
		if reclaimIfAbandoned(filepath.Join(root, strconv.Itoa(k))) != nil {
			busy[k] = true
		}
	}
	next := nextIndex(root)
	for i := 0; i <= maxIndex-minIndex; i++ {
		k := minIndex + (next-minIndex+i)%(maxIndex-minIndex+1)
		if busy[k] {
			continue
		}
		dir := filepath.Join(root, strconv.Itoa(k))
		if err := os.Mkdir(dir, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return nil, fmt.Errorf("create test-bed dir: %w", err)
		}
		s := &state{Index: k, Name: spec.Name, Created: time.Now().UTC(), Spec: spec, dir: dir}
		if !spec.Persistent {
			s.Owner = selfOwner()
		}
		if err := s.save(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := atomicfile.Write(filepath.Join(root, nextIndexFile), []byte(strconv.Itoa(k+1)), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("record the next test-bed index: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("no free test-bed index in %s: run `pipette-testbed status` and `pipette-testbed down --all`", root)
}

// reclaimIfAbandoned tears down the instance in dir when its owner died.
// It returns nil when dir is free (absent or reclaimed) and an error when it
// is in use. Called with the root lock held.
func reclaimIfAbandoned(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	s, err := loadState(dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, stateFile)); errors.Is(statErr, os.ErrNotExist) {
			// A directory without a state file was never handed out: state
			// is written under the lock right after the directory is made.
			return os.RemoveAll(dir)
		}
		return err
	}
	if s.Owner == nil || s.Owner.alive() {
		return fmt.Errorf("test-bed %d in use", s.Index)
	}
	return teardown(s)
}

// Info describes an existing instance, for status listings.
type Info struct {
	Index      int
	Name       string
	Dir        string
	Created    time.Time
	Persistent bool
	// OwnerAlive is false for a crashed test whose instance awaits reclaim.
	OwnerAlive bool
	Ready      bool
	Hosts      []Host
	// SshdAlive counts the instance's sshd processes still running.
	SshdAlive int
}

// List describes every instance under root ("" = DefaultStateRoot), sorted
// by index.
func List(root string) ([]Info, error) {
	if root == "" {
		root = DefaultStateRoot
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list test-beds in %s: %w", root, err)
	}
	var out []Info
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || !e.IsDir() {
			continue
		}
		s, err := loadState(filepath.Join(root, e.Name()))
		if err != nil {
			continue
		}
		alive := 0
		for _, o := range s.Sshd {
			if o.alive() {
				alive++
			}
		}
		out = append(out, Info{SshdAlive: alive,
			Index: s.Index, Name: s.Name, Dir: s.dir, Created: s.Created,
			Persistent: s.Owner == nil, OwnerAlive: s.Owner == nil || s.Owner.alive(),
			Ready: s.Ready, Hosts: s.Hosts,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}
