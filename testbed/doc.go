// Package testbed builds real multi-host clusters on one machine for tests:
// each host is a network namespace with its own sshd, hostname, /tmp and
// optional fake RDMA sysfs, joined by veth links on a bridge and shaped with
// tc. State lives in a directory so Down also cleans up after a crash.
//
// # Topology
//
// Instance k (allocated under a flock on the state root, default
// /var/lib/pipette-testbed, going round 1-254 so that a just-freed k is not
// handed out again at once) owns the subnet 198.18.k.0/24 and the names
// pl<k>h<i> (host i's namespace, address 198.18.k.(10+i)), pl<k>sw (a
// "switch" namespace holding every bridge) and plb<k> (the root namespace's
// veth into the switch, address 198.18.k.1, through which ssh and
// pipette-launch reach the hosts). Hosts of one group share a bridge; group
// bridges join a core bridge through veth uplinks that carry a tbf qdisc on
// both ends when Spec.GroupShape is set, so only traffic between groups (and
// between the root namespace and a group) is shaped. HostSpec.Shape shapes
// one host's own link in both directions.
//
// Each host runs `sshd -D` in its namespace plus fresh mount and UTS
// namespaces: hostname = host name, a private /sys/class holding only net
// (the host's lo and eth0) and, for IB or RoCE hosts, infiniband/mlx5_0
// (other classes are hidden), a tmpfs /tmp, and an /etc/hosts naming every
// host. Hosts share the machine's pid namespace and
// file system otherwise (so `ps` on a host shows every process; use
// Testbed.Processes for one host's).
//
// # Slurm
//
// Spec.Slurm (`pipette-testbed up --slurm`) also runs Debian's real Slurm
// on the hosts: munged on a private key and socket, slurmctld on the first
// host and one slurmd per host in that host's namespaces; clients reach it
// with Testbed.SlurmEnv (SLURM_CONF). slurm.go says what had to be turned
// off to run Slurm without systemd or cgroups of its own.
//
// # Files
//
// The state dir holds the client key (KeyFile), known_hosts with every host
// key under name and address (KnownHostsFile), an ssh_config mapping names
// and addresses to HostName/User/IdentityFile/StrictHostKeyChecking yes
// (SSHConfigFile), host names one a line (HostsFile), addresses (AddrsFile),
// /etc/hosts lines (EtcHostsFile), and per host its sshd config, host key,
// class dir and logs under host/<name>/.
//
// # Use
//
// Tests call New(t, spec), which removes the test-bed when the test ends;
// programs call Up and Down. DownDir, DownName and DownAll remove instances
// from their state, also those of crashed processes; Up reclaims instances
// whose owner process died. Everything needs root.
package testbed
