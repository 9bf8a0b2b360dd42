package launcher

import (
	"reflect"
	"testing"
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
		{"explicit address kept", HostTarget{Name: "gpu3", Addr: "10.1.1.3"}, SSHOptions{SSHConfigFile: "testdata/ssh_config"}, resolved{
			HostTarget: HostTarget{Name: "gpu3", Addr: "10.1.1.3", User: "trainer", Port: 2222},
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
