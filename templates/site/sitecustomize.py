"""Written by pipette-launch (--nccl-mode auto, job across RDMA islands).

Megatron-Core gives each process-group type its NCCL network through
--nccl-communicator-config-path, but the world group that
torch.distributed.init_process_group creates takes no options from that
file, and Megatron runs NCCL collectives on it (training.py's start-time
all_reduce). Left alone it would use NCCL's default network (InfiniBand where
the host has it) between islands that share no RDMA fabric, and hang. This
module, first on PYTHONPATH, waits until torch.distributed is imported and
then makes init_process_group pass pg_options with
config.net_name = $PIPETTE_NCCL_WORLD_NET for an NCCL backend, unless the
caller gave pg_options. Nothing is imported before the program imports
torch. Delete PIPETTE_NCCL_WORLD_NET to switch it off.
"""
import os
import sys

_TARGET = "torch.distributed.distributed_c10d"


def _patch(c10d, net):
    orig = c10d.init_process_group

    def init_process_group(*args, **kwargs):
        backend = kwargs.get("backend", args[0] if args else None)
        if "pg_options" not in kwargs and len(args) < 8 and backend is not None and "nccl" in str(backend).lower():
            try:
                opts = c10d.ProcessGroupNCCL.Options()
                opts.config.net_name = net
                kwargs["pg_options"] = opts
            except Exception as e:  # torch < 2.1 or built without NCCL
                sys.stderr.write("pipette-launch: cannot set the world group's NCCL network to %s: %s\n" % (net, e))
        return orig(*args, **kwargs)

    init_process_group.__wrapped__ = orig
    init_process_group.__doc__ = orig.__doc__
    c10d.init_process_group = init_process_group


class _Hook(object):
    def __init__(self, net):
        self.net = net

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real, net = spec.loader.exec_module, self.net

        def exec_module(module):
            real(module)
            _patch(module, net)

        spec.loader.exec_module = exec_module
        return spec


def _install():
    net = os.environ.get("PIPETTE_NCCL_WORLD_NET")
    if not net:
        return
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET], net)
        return
    sys.meta_path.insert(0, _Hook(net))


_install()
