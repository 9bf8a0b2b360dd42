package launcher

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
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
