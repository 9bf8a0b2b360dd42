"""Written by pipette-launch; first on each rank's PYTHONPATH. Two shims, each
on only when its variable is set, each waiting until the program imports the
module it changes (nothing is imported before that).

1. PIPETTE_NCCL_WORLD_NET (--nccl-mode auto, Megatron job across RDMA islands).

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

2. PIPETTE_PIPELINE_LAYERS (a DeepSpeed plan with uneven pipeline stages).
DeepSpeed's PipelineModule has no partition_method that takes explicit
boundaries; when deepspeed.runtime.pipe.module is imported this runs
pipette_ds_partition.install() (beside this file), which makes the module
split its layers as planned. Delete PIPETTE_PIPELINE_LAYERS to switch it off.
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


_PIPE_TARGET = "deepspeed.runtime.pipe.module"


class _Hook(object):
    """Runs after(module) once the module named target has been executed."""

    def __init__(self, target, after):
        self.target, self.after = target, after

    def find_spec(self, name, path, target=None):
        if name != self.target:
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
        real, after = spec.loader.exec_module, self.after

        def exec_module(module):
            real(module)
            after(module)

        spec.loader.exec_module = exec_module
        return spec


def _when_imported(target, after):
    if target in sys.modules:
        after(sys.modules[target])
    else:
        sys.meta_path.insert(0, _Hook(target, after))


def _partition(module):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import pipette_ds_partition
    finally:
        sys.path.pop(0)
    pipette_ds_partition.install()


def _install():
    net = os.environ.get("PIPETTE_NCCL_WORLD_NET")
    if net:
        _when_imported(_TARGET, lambda module: _patch(module, net))
    if os.environ.get("PIPETTE_PIPELINE_LAYERS"):
        _when_imported(_PIPE_TARGET, _partition)


_install()
