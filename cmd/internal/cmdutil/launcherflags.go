package cmdutil

import (
	"net"

	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/urfave/cli/v2"
)

// ExampleCluster is the --cluster value that plans on the embedded example
// cluster (examples/cluster.yaml): made-up hosts, for trying plans out.
const ExampleCluster = "example"

// FreePort is a TCP port free on this machine now: the kernel's pick for
// a listener on port 0, closed again for rank 0 to bind.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MemoryHeadroomFlag is --memory-headroom of plan and run: the share of
// each GPU's memory plans leave free (search.DefaultMemoryHeadroom says
// why 5%).
func MemoryHeadroomFlag() cli.Flag {
	return &cli.Float64Flag{Name: "memory-headroom", Value: search.DefaultMemoryHeadroom, Usage: "share of each GPU's memory a plan leaves free for the CUDA context, NCCL buffers and allocator fragmentation beyond the estimate (0 to below 0.5)"}
}
