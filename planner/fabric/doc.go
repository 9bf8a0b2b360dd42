// Package fabric decides how NCCL carries inter-host traffic: the --nccl-mode
// (Mode), the transport it gives a job (Transport) and whether islands share
// an RDMA fabric (SharedRDMA, SocketsOnly). cluster prices links for that
// transport; templates emit the matching NCCL settings.
package fabric
