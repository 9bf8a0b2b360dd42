// Package examples holds the example cluster files and model shapes; the
// default cluster is embedded so `pipette-launch plan` works with no hosts.
package examples

import _ "embed"

// DefaultCluster is examples/cluster.yaml: 4 hosts x 8 A100 80GB on HDR
// InfiniBand.
//
//go:embed cluster.yaml
var DefaultCluster []byte
