"""PyTorch's CPU convolution gradients as a benchmark anchor (`make bench ANCHORS=torch`).

Runs in its own venv (torch==2.13.0, CPU build; no TensorFlow), started by bench.py
and driven over stdin/stdout, one JSON object a line, so its rounds alternate with
ours and TF's in the same run:

    {"layer": LABEL, "op": KEY, "dtype": D, "layout": "NHWC"|"NCHW", "batch": N,
     "copies": K}       -> {"ready": true} (tensors built, one warm-up call)
    {"time": true}      -> {"seconds": S}  (per copy, _sample.sample_seconds)
    {"quit": true}

The gradient is `torch.ops.aten.convolution_backward` with the layer's stride,
dilation and groups (C for depthwise), on channels_last tensors for NHWC (contiguous
NCHW otherwise), output_mask selecting the input or the weight gradient alone. SAME
padding becomes PyTorch's symmetric padding of the same output size (the same work;
TF pads one more row at the bottom for some strided layers). Threads: the count in
TCB_ANCHOR_THREADS; ISA: ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA as the caller set.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from _sample import sample_seconds  # noqa: E402
from shapes import BY_LABEL  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


def prepare(request):
    layer = BY_LABEL[request["layer"]]
    dtype = DTYPES[request["dtype"]]
    fmt = torch.channels_last if request["layout"] == "NHWC" else torch.contiguous_format
    n, hw, c, k, s, d = (request["batch"], layer.hw, layer.in_depth, layer.k, layer.stride,
                         layer.dilation)
    groups = c if layer.depthwise else layer.groups
    out_c = c * layer.out_channels if layer.depthwise else layer.out_channels
    pad = 0 if layer.padding == "VALID" else (k - 1) * d // 2
    out = layer.out_hw()
    if (hw + 2 * pad - (k - 1) * d - 1) // s + 1 != out:
        raise ValueError(f"{layer.label}: no symmetric padding gives TF's output size {out}")
    gen = torch.Generator().manual_seed(0)

    def tensor(*shape):
        return torch.randn(*shape, generator=gen).to(dtype).contiguous(memory_format=fmt)
    x, w = tensor(n, c, hw, hw), tensor(out_c, c // groups, k, k)
    dys = [tensor(n, out_c, out, out) for _ in range(request["copies"])]
    mask = [True, False, False] if request["op"].endswith("_input") else [False, True, False]

    def run():
        for dy in dys:
            torch.ops.aten.convolution_backward(dy, x, w, None, [s, s], [pad, pad], [d, d], False,
                                                [0, 0], groups, mask)
    return run


def main():
    torch.set_num_threads(int(os.environ.get("TCB_ANCHOR_THREADS", os.cpu_count() or 1)))
    run, copies = None, 1
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        if "layer" in request:
            run, copies = prepare(request), request["copies"]
            with torch.no_grad():
                run()
            reply = {"ready": True, "torch": torch.__version__,
                     "capability": torch.backends.cpu.get_cpu_capability(),
                     "threads": torch.get_num_threads()}
        else:
            with torch.no_grad():
                reply = {"seconds": sample_seconds(run, copies)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
