package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// stopGrace is how long processes get between SIGTERM and SIGKILL.
const stopGrace = 2 * time.Second

// DownDir removes the instance whose state directory is dir: every process
// in its hosts' namespaces, the namespaces, its root-namespace link, and dir.
// It works from any process, also after the one that made it crashed, and
// removes only what the state file records.
func DownDir(dir string) error {
	dir = filepath.Clean(dir)
	unlock, err := lockRoot(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	return teardown(st)
}

// DownName removes every instance under root ("" = DefaultStateRoot) named
// name; it is an error when there is none.
func DownName(root, name string) error {
	infos, err := List(root)
	if err != nil {
		return err
	}
	var errs []error
	found := false
	for _, in := range infos {
		if in.Name == name {
			found = true
			errs = append(errs, DownDir(in.Dir))
		}
	}
	if !found {
		return fmt.Errorf("no test-bed named %q under %s: see `pipette-testbed status`", name, rootOrDefault(root))
	}
	return errors.Join(errs...)
}

// DownAll removes every instance under root ("" = DefaultStateRoot) except,
// unless includeLive, those still owned by a running process (a test in
// progress). It returns the directories removed.
func DownAll(root string, includeLive bool) ([]string, error) {
	infos, err := List(root)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, in := range infos {
		if !in.Persistent && in.OwnerAlive && !includeLive {
			continue
		}
		if err := DownDir(in.Dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, in.Dir)
	}
	return removed, errors.Join(errs...)
}

func rootOrDefault(root string) string {
	if root == "" {
		return DefaultStateRoot
	}
	return root
}

// teardown undoes what st records, in reverse order of creation. The state
// directory is kept when something could not be removed, so a retry works.
func teardown(st *state) error {
	var errs []error
	var victims []owner
	seen := map[int]bool{}
	var netns []string
	for _, ns := range madeNetns(st) {
		if netnsExists(ns) {
			netns = append(netns, ns)
		}
	}
	by, err := pidsByNetns(netns)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range netns {
		for _, p := range by[ns] {
			if t, err := processStartTime(p); err == nil && !seen[p] {
				seen[p] = true
				victims = append(victims, owner{Pid: p, StartTime: t})
			}
		}
	}
	for _, o := range append(append([]owner(nil), st.Sshd...), st.Daemons...) {
		if !seen[o.Pid] && o.alive() {
			seen[o.Pid] = true
			victims = append(victims, o)
		}
	}
	if err := stopProcesses(victims); err != nil {
		errs = append(errs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var del []string
	for i := len(netns) - 1; i >= 0; i-- {
		del = append(del, "netns del "+netns[i])
	}
	if err := batch(ctx, "ip", "", del); err != nil {
		errs = append(errs, err)
	}
	// The root link is a veth whose peer lived in the switch namespace, so
	// it is normally gone already.
	for _, l := range madeLinks(st) {
		if err := deleteLink(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("test-bed %d (%s): %w", st.Index, st.dir, errors.Join(errs...))
	}
	if err := os.RemoveAll(st.dir); err != nil {
		return fmt.Errorf("test-bed %d: remove %s: %w", st.Index, st.dir, err)
	}
	return nil
}

// deleteLink removes a link if it still exists. The kernel frees a deleted
// namespace's devices asynchronously, so a veth whose peer lived there can
// vanish between our look and our delete; ip then fails with "Cannot find
// device" or "RTNETLINK answers: No such device" depending on which step
// lost the race. Gone is what we want, so a failed delete is an error only
// when the link is still there afterwards.
func deleteLink(ctx context.Context, name string) error { return deleteLinkWith(ctx, name, run) }

// deleteLinkWith is deleteLink running ip through ipRun (tests script it).
func deleteLinkWith(ctx context.Context, name string, ipRun func(ctx context.Context, name string, args ...string) error) error {
	if !linkExists(ctx, name, ipRun) {
		return nil
	}
	if err := ipRun(ctx, "ip", "link", "del", "dev", name); err != nil && linkExists(ctx, name, ipRun) {
		return err
	}
	return nil
}

// linkExists asks ip, through ipRun, whether the link is there.
func linkExists(ctx context.Context, name string, ipRun func(ctx context.Context, name string, args ...string) error) bool {
	return ipRun(ctx, "ip", "link", "show", "dev", name) == nil
}

// madeNetns is what the state records plus the names Up derives from the
// spec, in creation order: a crash between creating a namespace and saving
// the state must not leak it. The names belong to this instance's index,
// which is held under the root lock, so nothing else uses them.
func madeNetns(st *state) []string {
	names := append([]string(nil), st.Netns...)
	derived := []string{swNetns(st.Index)}
	for i := range st.Spec.Hosts {
		derived = append(derived, hostNetns(st.Index, i+1))
	}
	for _, n := range derived {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func madeLinks(st *state) []string {
	if slices.Contains(st.Links, rootLink(st.Index)) {
		return st.Links
	}
	return append(append([]string(nil), st.Links...), rootLink(st.Index))
}

func netnsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// stopProcesses sends SIGTERM, waits stopGrace, then SIGKILLs survivors.
func stopProcesses(procs []owner) error {
	signalAll(procs, syscall.SIGTERM)
	if waitGone(procs, stopGrace) {
		return nil
	}
	signalAll(procs, syscall.SIGKILL)
	if waitGone(procs, stopGrace) {
		return nil
	}
	var left []int
	for _, o := range procs {
		if o.alive() {
			left = append(left, o.Pid)
		}
	}
	return fmt.Errorf("processes %v survived SIGKILL", left)
}

func signalAll(procs []owner, sig syscall.Signal) {
	for _, o := range procs {
		if o.alive() { // never signal a reused pid
			syscall.Kill(o.Pid, sig)
		}
	}
}

func waitGone(procs []owner, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		alive := false
		for _, o := range procs {
			if o.alive() {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
