"""Hash of a module's parameters (the ``params`` of ``epoch`` and ``params`` lines).

blake2b (128-bit digest, hex) over every tensor of ``named_parameters()`` in that order: its
dtype, its shape and its bytes (CPU, contiguous). Buffers are not hashed: DDP promises equal
parameters after every optimizer step, not equal buffers. BatchNorm's running statistics are
updated by each rank's own batches in every forward (DDP overwrites them with rank 0's at the next
forward when ``broadcast_buffers=True``, never when it is False), so on healthy ranks they differ
at any point between forwards (docs/trace-format.md, ``params``)."""

import hashlib


def _tensor_bytes(t):
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.is_quantized:
        t = t.int_repr()
    if t.dtype in (torch.bfloat16,) or str(t.dtype) in ("torch.float8_e4m3fn", "torch.float8_e5m2"):
        t = t.view(torch.int16 if t.element_size() == 2 else torch.int8)
    return t.numpy().tobytes() if t.dim() else t.reshape(1).numpy().tobytes()


def module_hash(module):
    h = hashlib.blake2b(digest_size=16)
    for _, t in module.named_parameters():
        if t is None:
            continue
        h.update(("%s|%s|" % (str(t.dtype).replace("torch.", ""), tuple(t.shape))).encode())
        h.update(_tensor_bytes(t))
    return h.hexdigest()


def gradient_hash(module, among=None):
    """The same hash over the gradients of the module's parameters (those whose id is in
    ``among``, when given; a parameter without a gradient hashes its name only): equal on every
    rank right after DDP's all-reduce, so gradients that differ at an optimizer step were changed
    on the ranks after it."""
    h = hashlib.blake2b(digest_size=16)
    for name, t in module.named_parameters():
        if among is not None and id(t) not in among:
            continue
        g = None if t is None else t.grad
        if g is None or g.is_sparse:
            h.update(("%s|none|" % name).encode())
            continue
        h.update(("%s|%s|" % (str(g.dtype).replace("torch.", ""), tuple(g.shape))).encode())
        h.update(_tensor_bytes(g))
    return h.hexdigest()


def _parameter_hash(t):
    h = hashlib.blake2b(digest_size=6)
    h.update(_tensor_bytes(t))
    return h.hexdigest()


def parts(module):
    """What the ``params`` line at the end adds, so that the audit can name the parameters that
    differ (NOTE [Which parameters parted], docs/audit.md): ``parts``, "name:hash" of every
    parameter; ``frozen``, those that do not train (requires_grad=False); ``renorm``, the weights
    of ``nn.Embedding(max_norm=…)``, which its forward renormalises in place."""
    import torch

    fields = {"parts": [], "frozen": [], "renorm": []}
    for name, t in module.named_parameters():
        if t is None:
            continue
        fields["parts"].append("%s:%s" % (name, _parameter_hash(t)))
        if not t.requires_grad:
            fields["frozen"].append(name)
    modules = getattr(module, "named_modules", None)  # a hand-averaged replica has none
    for prefix, m in modules() if modules is not None else ():
        if isinstance(m, torch.nn.Embedding) and m.max_norm is not None:
            fields["renorm"].append(prefix + ".weight" if prefix else "weight")
    return {k: v for k, v in fields.items() if v}
