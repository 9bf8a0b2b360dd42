// Package launcher talks to hosts: it parses host lists and hostfiles,
// connects over SSH (host keys verified against known_hosts), probes GPUs,
// NICs, memory and CPUs, measures pairwise bandwidth, uploads a rendered job,
// starts each host's ranks in their own process group, streams their output
// and stops every rank on every host when one fails or on a signal.
package launcher
