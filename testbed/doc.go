// Package testbed builds real multi-host clusters on one machine for tests:
// each host is a network namespace with its own sshd, hostname, /tmp and
// optional fake RDMA sysfs, joined by veth links on a bridge and shaped with
// tc. State lives in a directory so Down also cleans up after a crash.
package testbed
