"""Checks of pipette_nccl_groups.py that need no GPU (run by examples/helper_test.go)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipette_nccl_groups as png  # noqa: E402

domains = ["fab-a", "fab-a", "fab-b", "fab-b", ""]
assert png.net_for([0, 1], domains) == "IB"
assert png.net_for([0, 2], domains) == "Socket", "a group across fabrics must use sockets"
assert png.net_for([4], domains) == "Socket", "a rank without RDMA cannot use IB"
assert png.rank_domains({"PIPETTE_RDMA_DOMAINS": "a,a,,b", "WORLD_SIZE": "4"}) == ["a", "a", "", "b"]
try:
    png.rank_domains({"PIPETTE_RDMA_DOMAINS": "a,b", "WORLD_SIZE": "4"})
    raise AssertionError("a short PIPETTE_RDMA_DOMAINS was accepted")
except RuntimeError as e:
    assert "names 2 ranks" in str(e)
try:
    png.nccl_options("ib")
    raise AssertionError("a misspelled net name was accepted")
except ValueError:
    pass
import torch  # noqa: E402

try:
    opts = png.nccl_options("Socket")
    assert opts.config.net_name == "Socket"
    print("options built: torch %s, net_name %s" % (torch.__version__, opts.config.net_name))
except RuntimeError as e:
    # A CPU build (the test machines' Debian torch 1.13) says what is missing.
    assert "no NCCL" in str(e) or "needs torch >= 2.1" in str(e), e
    print("options refused as expected: %s" % e)
print("ok")
