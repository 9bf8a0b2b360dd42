// Package fabric names how NCCL carries inter-host traffic (Transport):
// cost prices links for the transport the job will use, and templates emit
// the matching NCCL settings.
package fabric
