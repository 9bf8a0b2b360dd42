"""One NCCL network per process group for DeepSpeed and plain torch scripts.

NCCL >= 2.17.1 lets each communicator choose its network (ncclConfig_t.netName:
"IB" or "Socket"); torch >= 2.1 exposes it as
ProcessGroupNCCL.Options().config.net_name. A job spanning RDMA islands joined
only by Ethernet can then keep InfiniBand/RoCE inside each island and use TCP
sockets only for the groups that cross. One communicator never mixes
transports, so a group gets IB only when all its ranks sit on one RDMA fabric.
NCCL_NET must stay unset: it overrides every communicator's choice.

pipette-launch renders this for Megatron-LM itself (--nccl-communicator-config-path);
a DeepSpeed or torch script creates its own groups, so it can use this module:

    import torch.distributed as dist
    import pipette_nccl_groups as png

    dist.init_process_group("nccl", pg_options=png.nccl_options("Socket"))  # the world group crosses islands
    domains = png.rank_domains()            # each rank's RDMA fabric, from the environment
    for ranks in my_data_parallel_groups:
        g = png.new_group(ranks, domains)   # IB inside one fabric, Socket otherwise

rank_domains() reads PIPETTE_RDMA_DOMAINS (one fabric name per global rank,
comma-separated; empty for a rank without RDMA), which you set (pipette-launch
does not render it yet: --env PIPETTE_RDMA_DOMAINS=...), or pass your own list.
Under pipette-launch, DeepSpeed and torch jobs across
islands still get NCCL_IB_DISABLE=1 (sockets everywhere), which makes every
"IB" group fail: give --env NCCL_IB_DISABLE=0 and the hosts' NCCL_IB_HCA when
your script builds every group (and the world group) with this module.
"""
import os

NET_IB = "IB"
NET_SOCKET = "Socket"


def net_for(ranks, domains):
    """The network a group of global ranks can use: "IB" when every rank's
    RDMA fabric is the same non-empty name, else "Socket"."""
    fabrics = {domains[r] for r in ranks}
    if len(fabrics) == 1 and "" not in fabrics:
        return NET_IB
    return NET_SOCKET


def rank_domains(env=None):
    """Each global rank's RDMA fabric from PIPETTE_RDMA_DOMAINS."""
    env = os.environ if env is None else env
    raw = env.get("PIPETTE_RDMA_DOMAINS")
    if raw is None:
        raise RuntimeError("PIPETTE_RDMA_DOMAINS is not set: pass each rank's RDMA fabric yourself")
    domains = raw.split(",")
    world = env.get("WORLD_SIZE")
    if world is not None and len(domains) != int(world):
        raise RuntimeError("PIPETTE_RDMA_DOMAINS names %d ranks, WORLD_SIZE is %s" % (len(domains), world))
    return domains


def nccl_options(net_name):
    """ProcessGroupNCCL.Options with config.net_name set (torch >= 2.1,
    built with NCCL). Raises RuntimeError saying what is missing."""
    if net_name not in (NET_IB, NET_SOCKET):
        raise ValueError("net_name %r: want %r or %r" % (net_name, NET_IB, NET_SOCKET))
    import torch.distributed as dist

    pg = getattr(dist, "ProcessGroupNCCL", None)
    if pg is None:
        raise RuntimeError("this torch has no NCCL (ProcessGroupNCCL is missing): a CPU build; use gloo")
    opts = pg.Options()
    config = getattr(opts, "config", None)
    if config is None or not hasattr(config, "net_name"):
        import torch

        raise RuntimeError("torch %s has no ProcessGroupNCCL.Options().config.net_name (needs torch >= 2.1)" % torch.__version__)
    config.net_name = net_name
    return opts


def new_group(ranks, domains, **kwargs):
    """torch.distributed.new_group for NCCL with the network net_for picks.
    Every rank must call it for every group, as with new_group itself."""
    import torch.distributed as dist

    kwargs.setdefault("pg_options", nccl_options(net_for(ranks, domains)))
    return dist.new_group(ranks=list(ranks), **kwargs)
