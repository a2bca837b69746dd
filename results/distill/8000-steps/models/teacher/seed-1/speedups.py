"""What the model does beyond the paper to run fast. Each piece computes the same function as the plain one (the
tests compare them) and says which command measures what it buys; the figures are in docs/performance.md.

This file travels to the Hub with ``modeling_vanilla.py`` (it imports only torch).
"""

from contextlib import AbstractContextManager, nullcontext

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def residual_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout(x) = x * m / (1 - P_drop), m_i ~ Bernoulli(1 - P_drop): §5.4's residual dropout.

    On a CPU ``F.dropout`` draws one 32-bit Mersenne-Twister number per element, a large share of a small model's
    bf16 training step; here one draw serves two elements (two 15-bit uniforms from its halves), so P_drop is
    resolved to 1/32768. The same generator, so ``torch.manual_seed`` still fixes the masks. Other devices use
    ``F.dropout``, and so does compiled code: inductor draws the mask inside the kernel it fuses the dropout into,
    from its own generator (and ``random_`` would break the graph). Measured by ``vanilla-bench --config small``
    (training tokens/s)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p=p, training=True)
    if torch.compiler.is_compiling():
        return compiled_residual_dropout(x, p)
    bits = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_()  # uniform on [0, 2^31)
    keep = (bits.view(torch.int16)[: x.numel()] & 0x7FFF) >= round(p * 32768)  # (numel,) from 2 halves a draw
    return x * keep.view(x.shape) * (1.0 / (1.0 - p))


def compiled_residual_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """``residual_dropout`` as inductor compiles it well on a CPU: the random numbers out of place (``random_``
    breaks the graph), and the mask as 0 / 1 integers, never booleans. Inductor's CPU kernels store and load
    booleans element by element (a boolean mask of 2M elements took 7-13 ms against 0.5-1 ms eager), and the
    partitioner keeps a boolean mask for the backward pass wherever one exists. The same distribution as eager,
    other masks (``torch.randint`` draws differently from ``random_``)."""
    bits = torch.randint(0, 2**31, ((x.numel() + 1) // 2,), dtype=torch.int32, device=x.device)
    low15 = bits.view(torch.int16)[: x.numel()].to(torch.int32) & 0x7FFF
    keep = 1 + ((low15 - round(p * 32768)) >> 31)  # 1 where low15 >= threshold, else 0 (an arithmetic shift)
    return x * (keep.view(x.shape).to(x.dtype) * (1.0 / (1.0 - p)))


class _ReLUFromOutput(torch.autograd.Function):
    """ReLU whose backward multiplies by sign(output), 0 or 1, instead of reading a boolean mask."""

    @staticmethod
    def forward(ctx, x):
        out = torch.relu(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out.sign()


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(0, x), §3.3's activation. Compiled on a CPU, its backward reads the output (which the next matrix
    product keeps anyway) instead of a boolean mask of x <= 0, for the reason in ``compiled_residual_dropout``: the
    mask cost a compiled step of the Multi30k preset more than the eager ReLU did."""
    if torch.compiler.is_compiling() and x.device.type == "cpu":
        return _ReLUFromOutput.apply(x)
    return torch.relu(x)


# Keys up to this many positions count as "short" for math_attention_is_faster: Multi30k's sentences and the bench's
# training shapes; longer sequences keep SDPA, whose memory does not grow with the attention matrix.
MATH_ATTENTION_MAX_KEYS = 256


def math_attention_is_faster(query: torch.Tensor, key: torch.Tensor) -> bool:
    """Whether plain matmul + softmax beats SDPA for this attention: when training in bf16 or fp16 on a CPU over
    short sequences, where PyTorch's CPU flash-attention backward gains nothing from the half-precision type. The
    same math (agreeing to 1e-5); in fp32 the two are as fast and SDPA, which keeps no attention matrix for the
    backward pass, is kept. Measured by ``vanilla-bench --config small`` (bf16 training tokens/s)."""
    return (
        query.device.type == "cpu"
        and query.dtype in (torch.bfloat16, torch.float16)
        and torch.is_grad_enabled()
        and query.requires_grad
        and key.shape[-2] <= MATH_ATTENTION_MAX_KEYS
    )


# SDPA's kernels but cuDNN's, in PyTorch's order of preference
WITHOUT_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def sdpa_without_cudnn(query: torch.Tensor) -> AbstractContextManager:
    """On CUDA, eager SDPA with the kernels enabled but cuDNN's. cuDNN's attention builds an execution plan for each
    new (batch, length) shape, and token batches change shape at every batch, as generate() does at every token: on
    an H200 its calls took 8 ms of host time each in the wmt14 preset's first steps (cold plans, under the profiler:
    82% of the host time, against 80 ms of GPU work a step; docs/performance.md). Flash and memory-efficient attention
    plan nothing. Nothing changes elsewhere, nor where the user has turned cuDNN's off or left only it on.

    Not in compiled code: dynamo restores the flags it traced with, not the caller's, so the context would undo a
    user's choice; a compiled run turns cuDNN's attention off for the process instead (training/step/compiled.py). The
    flags are process-wide: forwards on two threads at once may leave cuDNN's off."""
    if query.device.type != "cuda" or torch.compiler.is_compiling():
        return nullcontext()
    flags = (
        torch.backends.cuda.flash_sdp_enabled(),
        torch.backends.cuda.mem_efficient_sdp_enabled(),
        torch.backends.cuda.math_sdp_enabled(),
    )
    enabled = [backend for backend, on in zip(WITHOUT_CUDNN, flags, strict=True) if on]
    return sdpa_kernel(enabled) if enabled and torch.backends.cuda.cudnn_sdp_enabled() else nullcontext()


# Rows of the loss computed at once. Each chunk adds its (V, d) product into dL/dW, so a chunk needs enough rows for
# its matrix products to outweigh that pass over W (vanilla-bench --config base: the training step's time).
LOSS_CHUNK_ROWS = 1024


class LinearCrossEntropy(torch.autograd.Function):
    """loss = sum_i [ lse(z_i) - (1 - eps) z_{i, y_i} - eps / V sum_c z_{i, c} ] / denominator,   z = h W^T + b

    §3.4's pre-softmax linear layer and §5.4's label-smoothed cross-entropy in one: the same value as
    ``F.cross_entropy(z, y, label_smoothing=eps, reduction="sum") / denominator``, without ever holding the
    (tokens, vocab) logits or their gradient. Rows go through in chunks (compiled, in one); each chunk's gradient
    dL/dz = (softmax(z) - (1 - eps) onehot(y) - eps / V) / denominator is formed in place over its logits and
    multiplied straight into dL/dh and dL/dW, so ``backward`` only scales them. torch has no such fused op; with a
    small model the vocabulary side is a large share of a training step (``vanilla-bench``: training tokens/s and
    peak memory). Under autocast the products run in the autocast dtype and the softmax in fp32, as unfused."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, smoothing: float, denominator):
        # hidden (N, d), labels (N,) with -100 for rows that do not count, weight (V, d), bias (V,) or None (a buffer)
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
        h, w = hidden.to(dtype), weight.to(dtype)
        vocab = w.shape[0]
        grad_h = [] if ctx.needs_input_grad[0] else None  # each chunk's dL/dh, concatenated at the end
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if ctx.needs_input_grad[1] else None
        )
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        # Compiled, one chunk: the graph unrolls the loop, so each number of chunks was a graph of its own (the
        # wmt14 preset's batches need 1 to 4; on a lent H200 each took ~50 s to compile). Split, and dL/dh
        # concatenated, not a range of slices written: slices would fix N in the graph.
        rows = h.shape[0] if torch.compiler.is_compiling() else LOSS_CHUNK_ROWS
        with torch.autocast(device, enabled=False):
            for h_c, y_c in zip(h.split(rows), labels[:, None].split(rows), strict=True):
                counts = y_c != -100  # (rows, 1); masked, not dropped, so shapes stay static for torch.compile
                y_c = y_c.masked_fill(~counts, 0)
                z = (h_c @ w.T).float()  # (rows, V)
                if bias is not None:
                    z += bias
                lse = torch.logsumexp(z, dim=-1, keepdim=True)
                row_loss = lse - (1 - smoothing) * z.gather(1, y_c) - smoothing / vocab * z.sum(-1, keepdim=True)
                total += torch.where(counts, row_loss, 0.0).sum()
                if grad_h is None and grad_w is None:
                    continue
                grad_z = z.sub_(lse).exp_().sub_(smoothing / vocab)  # softmax - eps / V, in place of z
                grad_z.scatter_add_(1, y_c, grad_z.new_full(y_c.shape, smoothing - 1))
                grad_z = grad_z.mul_(counts / denominator).to(dtype)
                if grad_h is not None:
                    grad_h.append(grad_z @ w)
                if grad_w is not None:
                    grad_w += grad_z.T @ h_c
        ctx.save_for_backward(None if grad_h is None else torch.cat(grad_h).to(hidden.dtype), grad_w)
        ctx.weight_dtype = weight.dtype
        return total / denominator

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors
        grad_h = None if grad_h is None else grad_h * grad_loss
        grad_w = None if grad_w is None else (grad_w * grad_loss).to(ctx.weight_dtype)
        return grad_h, grad_w, None, None, None, None
