"""The fp8 (e4m3) attention kernel at head dim 128 under ncu, and the shared-memory traffic its plans predict.

    python bench/ncu_attention_fp8.py predict      # the prediction (CPU)
    ncu --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,... -k regex:attention_fwd \\
        python bench/ncu_attention_fp8.py            # one launch to profile (GPU)

One launch of examples/kernels/attention_fwd.cu's e4m3 d 128 kernel (seq 4096, non-causal, batch 4, 8 heads,
only the fp8 d 128 kernels built).  ``predict`` prints the shared-memory LSU wavefronts of the producer's V
transposes (llgen chain's relayout of examples/chains/fa3_fp8_attention.yaml, per warp and tile) and of
the O staging (attention_stage_o_d128), summed over the launch: what ncu's
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld/st count apart from the kernel's mbarrier traffic.
"""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "gpu_tests"), os.path.join(ROOT, "bench"), ROOT]
B, H, S, D, BM = 4, 8, 4096, 128, 128


def predict() -> str:
    from ll_codegen import api
    from ll_codegen.chain.description import load_chain
    from ll_codegen.chain.search import plan_chain
    v = plan_chain(load_chain(os.path.join(ROOT, "examples", "chains", "fa3_fp8_attention.yaml"))).plans[1]
    st = api.plan_conversion(os.path.join(ROOT, "examples", "attention", "o_acc_d128.yaml"),
                             os.path.join(ROOT, "examples", "attention", "q_nvmma_d128.yaml"), dtype="f16")
    blocks, tiles = B * H * S // BM, S // 128
    ld = blocks * tiles * v.num_warps * v.load.memory.cost.total_wavefronts
    stv = blocks * tiles * v.num_warps * v.store.memory.cost.total_wavefronts
    sto = blocks * 2 * st.num_warps * st.memory.cost.total_wavefronts
    return (f"predicted shared LSU wavefronts: loads {ld} (V transposes), stores {stv + sto} (V transposes "
            f"{stv} + O staging {sto}); bank conflicts {v.load.memory.cost.bank_conflicts + v.store.memory.cost.bank_conflicts}")


def launch() -> None:
    import torch
    import test_attention_fwd as ta
    lib = ta.Library(ta.build(tempfile.mkdtemp(), ("-lineinfo", "-DLLGEN_ATTENTION_DISABLE_F16=1",
                                                   "-DLLGEN_ATTENTION_DISABLE_BF16=1", "-DLLGEN_ATTENTION_DISABLE_D64=1",
                                                   "-DLLGEN_ATTENTION_DISABLE_D256=1")))
    q8, k8, v8 = ta.fp8_inputs(B, H, H, S, S, seed=3)
    o = torch.empty((B, H, S, D), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty((B, H, S), device="cuda")
    lib.prepared(q8, k8, v8, o, lse, False, descales=ta.FP8_DESCALES)()
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1:] == ["predict"]:
        print(predict())
    else:
        launch()
