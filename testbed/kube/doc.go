// Package kube runs a real single-machine Kubernetes for tests: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, the JobSet
// controller and webhooks (and Kubeflow Trainer v2), with fake nodes (kwok)
// and/or one real kubelet that runs containers under Debian's containerd and
// runc on a CNI bridge, with CoreDNS for the pods' headless-service names.
//
// # Recipe
//
// scripts/ holds the recipe from the project's shared kubernetes folder
// (build.sh, setup.sh, up.sh, down.sh, unchanged; its README says why each
// step is there) plus image.sh, which builds a container image from the
// machine's own Debian packages (python3, python3-torch) and imports it
// into the kubelet's containerd: nothing is ever pulled. Every binary is
// built from the Go module proxy, once, into a cache directory outside the
// repository keyed by the pinned versions (BinDir); Build fills it and
// returns at once when it is complete.
//
// # Addresses
//
// Only loopback and 198.19.128.0/22, inside 198.18.0.0/15 (reserved for
// network testing) and disjoint from the netns test-bed's 198.18.k.0/24:
// pods 198.19.128.0/24 (bridge k8sbr0, gateway and cluster DNS
// 198.19.128.1), services 198.19.129.0/24, kwok pods 198.19.130.0/24;
// apiserver 127.0.0.1:6443, etcd 127.0.0.1:2379, JobSet webhooks
// 127.0.0.1:9443, Trainer webhooks 127.0.0.1:9444, kubelet 127.0.0.1:10250.
//
// Ports, the bridge and the node name are fixed, so one stack runs per
// machine: Up holds a machine-wide lock (LockFile) until Down, and a second
// Up waits for it (go test runs packages in parallel). A port taken while
// the lock is free (the daemons of a killed run, which outlive it under
// `timeout`) makes Up fail, naming the port, rather than talk to them.
//
// # Use
//
// Tests call New(t, mode), which fails with what to run when the binaries
// are not built, and removes the stack when the test ends; programs call
// Build, Up and Stack.Down (`pipette-testbed up --kubernetes`). The kwok mode
// needs no root; the kubelet modes do (containerd, mounts, the bridge).
package kube
