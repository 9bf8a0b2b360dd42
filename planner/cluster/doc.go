// Package cluster is the cluster description: the YAML file (islands of
// hosts, GPUs, NICs, links, measured bandwidth and compute, calibration),
// its strict checks, its resolution into a Cluster of hosts and the links
// NCCL will use between them (priced for a fabric.Transport, calibration
// applied: the factors planner/cluster/calib records), and software
// versions; planner/calibration fits the factors.
package cluster
