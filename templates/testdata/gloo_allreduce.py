# A real torch.distributed job for the launch-script test: every rank joins
# through the torchrun environment the script sets, all-reduces its rank and
# writes what it saw to OUT_DIR/rank<N>.txt.
import os
import sys

import torch
import torch.distributed as dist

out_dir = sys.argv[1]
dist.init_process_group("gloo")  # env:// : MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
with open(os.path.join(out_dir, "rank%d.txt" % dist.get_rank()), "w") as f:
    f.write("rank=%d world=%d local=%s sum=%d\n" % (
        dist.get_rank(), dist.get_world_size(), os.environ["LOCAL_RANK"], int(t.item())))
dist.destroy_process_group()
