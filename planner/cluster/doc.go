// Package cluster is the cluster description: the YAML file (islands of
// hosts, GPUs, NICs, links, measured bandwidth and compute, calibration),
// its strict checks, and its resolution into a Cluster of hosts and the
// links NCCL will use between them (priced for a fabric.Transport). It also
// fits calibration factors from observed runs and compares software versions.
package cluster
