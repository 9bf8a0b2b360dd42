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

// UseAllGPUsFlag is --use-all-gpus of plan and run: keep the rule that a
// plan uses every GPU of the cluster, or there is none
// (search.Options.UseAllGPUs).
func UseAllGPUsFlag() cli.Flag {
	return &cli.BoolFlag{Name: "use-all-gpus", Usage: "plan only layouts that use every GPU of the cluster, or refuse; by default a plan may leave whole hosts idle when no layout uses them all or fewer are faster (the plan says which and why)"}
}

// RecomputeFlag, DistributedOptimizerFlag and NoOffloadFlag are plan's and
// run's pins of recompute, Megatron's distributed optimizer and CPU
// offload. For run they keep what a Megatron-LM script's arguments cannot
// say: its flags turn these on, none keeps them off (planner.Pins).
func RecomputeFlag() cli.Flag {
	return &cli.StringFlag{Name: "recompute", Usage: "fix recomputation: none, selective or full (run: a Megatron script's arguments cannot ask for none)"}
}

// DistributedOptimizerFlag: see RecomputeFlag.
func DistributedOptimizerFlag() cli.Flag {
	return &cli.BoolFlag{Name: "distributed-optimizer", Usage: "fix Megatron's distributed optimizer on (=false: off)"}
}

// NoOffloadFlag and OffloadFlag: see RecomputeFlag.
func NoOffloadFlag() cli.Flag {
	return &cli.BoolFlag{Name: "no-offload", Usage: "never offload to CPU"}
}

// OffloadFlag: see NoOffloadFlag.
func OffloadFlag() cli.Flag {
	return &cli.BoolFlag{Name: "offload", Usage: "only plans with CPU offload"}
}

// DistributedOptimizerPin is --distributed-optimizer as given (nil: not
// given, free).
func DistributedOptimizerPin(c *cli.Context) *bool {
	if !c.IsSet("distributed-optimizer") {
		return nil
	}
	v := c.Bool("distributed-optimizer")
	return &v
}
