package probe

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// probe --json: the probed hosts and the cluster file's text on stdout;
// the file is still written to -o, but not to stdout with -o -.
func TestProbeJSON(t *testing.T) {
	t.Parallel()
	probes := []*probe.HostProbe{
		{Target: "gpu1", Hostname: "gpu1", Addr: "198.18.0.11", MemoryBytes: 512 << 30, CPUCores: 64,
			GPUs: []probe.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, BusID: "00000000:18:00.0"}},
			NICs: []probe.NIC{{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", RateGbitPerS: 100, State: "up", Active: true}}},
		{Target: "gpu2", Hostname: "gpu2", Addr: "198.18.0.12", MemoryBytes: 512 << 30, CPUCores: 64,
			GPUs: []probe.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, BusID: "00000000:18:00.0"}},
			NICs: []probe.NIC{{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", RateGbitPerS: 100, State: "up", Active: true}}},
	}
	f, _, err := probe.BuildClusterFile(probes, probe.ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := clusterFileText(f)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	for _, output := range []string{"-", file} {
		t.Run(output, func(t *testing.T) {
			var out, errOut bytes.Buffer
			opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &errOut}, Output: output, JSON: true}
			if err := printProbeJSON(opts, probes, data); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Hosts []struct {
					Target string `json:"target"`
					Addr   string `json:"addr"`
					GPUs   []struct {
						Name string `json:"name"`
					} `json:"gpus"`
				} `json:"hosts"`
				ClusterFile string `json:"cluster_file"`
				Output      string `json:"output"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out.String())
			}
			if len(got.Hosts) != 2 || got.Hosts[1].Addr != "198.18.0.12" || len(got.Hosts[0].GPUs) != 1 {
				t.Fatalf("hosts %+v", got.Hosts)
			}
			cf, err := cluster.Parse([]byte(got.ClusterFile))
			if err != nil {
				t.Fatalf("cluster_file does not parse: %v\n%s", err, got.ClusterFile)
			}
			if len(cf.Clusters) != 1 || len(cf.Clusters[0].Hosts) != 2 || cf.Clusters[0].GPUsPerHost != 1 {
				t.Fatalf("cluster_file %+v", cf.Clusters)
			}
			written, err := os.ReadFile(file)
			switch {
			case output == "-" && (got.Output != "" || err == nil):
				t.Fatalf("-o -: output %q, file written: %v", got.Output, err == nil)
			case output == file && (got.Output != file || err != nil || string(written) != got.ClusterFile):
				t.Fatalf("-o FILE: output %q, read %v, same content %v", got.Output, err, string(written) == got.ClusterFile)
			}
		})
	}
}
