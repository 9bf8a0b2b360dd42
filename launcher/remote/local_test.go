package remote

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsThisMachine(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(host, ".")
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, []byte("Host elsewhere\n  HostName 192.0.2.200\nHost here\n  HostName 127.0.0.1\nHost boxport\n  HostName 127.0.0.1\n  Port 2222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := SSHOptions{SSHConfigFile: cfg}
	for _, tc := range []struct {
		t    HostTarget
		want bool
	}{
		{HostTarget{Name: "localhost"}, true},
		{HostTarget{Name: "127.0.0.1"}, true},
		{HostTarget{Name: "::1"}, true},
		{HostTarget{Name: host}, true},
		{HostTarget{Name: strings.ToUpper(short)}, true},
		{HostTarget{Name: short + ".some.domain"}, !strings.Contains(host, ".")},
		{HostTarget{Name: "here"}, true}, // ssh config HostName
		{HostTarget{Name: "localhost", User: me.Username}, true},
		{HostTarget{Name: "localhost", Port: 22}, true},
		{HostTarget{Name: "localhost", Port: 2222}, false}, // a container behind a port
		{HostTarget{Name: "localhost", User: "nobody-else"}, false},
		{HostTarget{Name: "boxport"}, false},
		{HostTarget{Name: "elsewhere"}, false},
		{HostTarget{Name: "node1"}, host == "node1"},
		{HostTarget{Name: "192.0.2.201"}, false},
	} {
		if got := IsThisMachine(tc.t, opts); got != tc.want {
			t.Errorf("IsThisMachine(%s) = %v, want %v", tc.t, got, tc.want)
		}
	}
}
