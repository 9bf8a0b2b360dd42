package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestResolveTargetFromSSHConfig(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	cases := []struct {
		name string
		t    HostTarget
		opts SSHOptions
		want resolved
	}{
		{"config applies", HostTarget{Name: "gpu1"}, SSHOptions{SSHConfigFile: "testdata/ssh_config"}, resolved{
			HostTarget: HostTarget{Name: "gpu1", Addr: "gpu1.cluster.example", User: "trainer", Port: 2222},
			identities: []string{"/home/u/.ssh/cluster_key", "/keys/trainer-gpu1"},
			knownHosts: "/home/u/.ssh/cluster_known_hosts",
		}},
		{"target beats options beats config", HostTarget{Name: "gpu2", User: "root"},
			SSHOptions{SSHConfigFile: "testdata/ssh_config", Port: 22, IdentityFiles: []string{"/k"}}, resolved{
				HostTarget: HostTarget{Name: "gpu2", Addr: "gpu2.cluster.example", User: "root", Port: 22},
				identities: []string{"/k", "/home/u/.ssh/cluster_key", "/keys/root-gpu2"},
				knownHosts: "/home/u/.ssh/cluster_known_hosts",
			}},
		{"explicit address kept", HostTarget{Name: "gpu3", Addr: "198.18.251.3"}, SSHOptions{SSHConfigFile: "testdata/ssh_config"}, resolved{
			HostTarget: HostTarget{Name: "gpu3", Addr: "198.18.251.3", User: "trainer", Port: 2222},
			identities: []string{"/home/u/.ssh/cluster_key", "/keys/trainer-gpu3"},
			knownHosts: "/home/u/.ssh/cluster_known_hosts",
		}},
		{"other host", HostTarget{Name: "login", User: "x"}, SSHOptions{SSHConfigFile: "testdata/ssh_config"}, resolved{
			HostTarget: HostTarget{Name: "login", Addr: "198.18.0.5", User: "x", Port: 22},
		}},
		{"no config", HostTarget{Name: "gpu1", User: "x"}, SSHOptions{SSHConfigFile: "none"}, resolved{
			HostTarget: HostTarget{Name: "gpu1", Addr: "gpu1", User: "x", Port: 22},
		}},
	}
	for _, c := range cases {
		got, err := resolveTarget(c.t, c.opts)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v\nwant %+v", c.name, got, err, c.want)
		}
	}
	if _, err := resolveTarget(HostTarget{Name: "a"}, SSHOptions{SSHConfigFile: "testdata/missing"}); err == nil {
		t.Errorf("missing explicit --ssh-config: no error")
	}
}

func TestHostKeyAlgorithmsFromKnownHosts(t *testing.T) {
	// golang/go#29286: with only an RSA key known, Go must ask for RSA
	// host keys, not negotiate ed25519 and call it a mismatch.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := ssh.NewPublicKey(&rsaKey.PublicKey)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	edKey, _ := ssh.NewPublicKey(edPub)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	content := knownhosts.Line([]string{"198.18.250.1"}, rsaPub) + "\n" +
		knownhosts.Line([]string{"[198.18.250.2]:2222"}, rsaPub) + "\n" +
		knownhosts.Line([]string{"[198.18.250.2]:2222"}, edKey) + "\n"
	if err := os.WriteFile(kh, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		hostport string
		want     []string
	}{
		{"198.18.250.1:22", []string{"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"}},
		{"198.18.250.2:2222", []string{"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa", "ssh-ed25519"}},
		{"198.18.250.3:22", nil},
	}
	for _, c := range cases {
		_, algos, err := hostKeyCheck(kh, c.hostport)
		if err != nil || !reflect.DeepEqual(algos, c.want) {
			t.Errorf("%s: algos = %v, %v; want %v", c.hostport, algos, err, c.want)
		}
	}
	if _, _, err := hostKeyCheck(filepath.Join(t.TempDir(), "none"), "198.18.250.1:22"); err == nil ||
		!strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "--insecure-skip-host-key-check") {
		t.Errorf("missing known_hosts: %v", err)
	}
}

// Like OpenSSH, a host is checked under the name it was given and then the
// address dialled: probe writes addresses, ssh-keyscan NAME records names.
func TestHostKeyCheckByNameThenAddress(t *testing.T) {
	newKey := func() ssh.PublicKey {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		k, _ := ssh.NewPublicKey(pub)
		return k
	}
	good, other := newKey(), newKey()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	byName := write("by-name", knownhosts.Line([]string{"node1"}, good)+"\n")
	byAddr := write("by-addr", knownhosts.Line([]string{"198.18.250.9"}, good)+"\n")
	names := lookupNames("node1", "198.18.250.9:22", 22)
	remote := &net.TCPAddr{IP: net.ParseIP("198.18.250.9"), Port: 22}
	for _, tc := range []struct {
		name string
		file string
		key  ssh.PublicKey
		want string // "" ok, "unknown", "mismatch"
	}{
		{"recorded by name", byName, good, ""},
		{"recorded by address", byAddr, good, ""},
		{"changed key under name", byName, other, "mismatch"},
		{"changed key under address", byAddr, other, "mismatch"},
		{"not recorded", write("empty", ""), good, "unknown"},
	} {
		cb, _, err := hostKeyCheck(tc.file, names...)
		if err != nil {
			t.Fatal(err)
		}
		err = cb("198.18.250.9:22", remote, tc.key)
		var unknown *UnknownHostKeyError
		var mismatch *HostKeyMismatchError
		got := ""
		switch {
		case errors.As(err, &unknown):
			got = "unknown"
			if unknown.Host != "node1" {
				t.Errorf("%s: unknown host reported as %q, want node1", tc.name, unknown.Host)
			}
		case errors.As(err, &mismatch):
			got = "mismatch"
		case err != nil:
			got = "error: " + err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
