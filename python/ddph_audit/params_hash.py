"""Hash of a module's parameters and buffers (the ``params`` of ``epoch`` and ``params`` lines).

blake2b (128-bit digest, hex) over, for every tensor of ``named_parameters()`` then
``named_buffers()`` in that order: its dtype, its shape and its bytes (CPU, contiguous)."""

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
    tensors = [p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()]
    for t in tensors:
        if t is None:
            continue
        h.update(("%s|%s|" % (str(t.dtype).replace("torch.", ""), tuple(t.shape))).encode())
        h.update(_tensor_bytes(t))
    return h.hexdigest()
