"""The process's global random generators' states, and which of them a piece of code advanced."""


def global_rng_states():
    """The process's global random generators' states: torch's, Python's, numpy's (if loaded)."""
    import random
    import sys
    import torch
    states = {"torch": torch.random.get_rng_state(), "random": random.getstate()}
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            # The key and the position in it: a draw shorter than the key's 624 words only
            # moves the position.
            key, pos = np.random.get_state()[1:3]
            states["numpy"] = (key.copy(), int(pos))
        except Exception:
            pass
    return states


def moved_generators(before, after):
    """The names of the generators whose state changed between the two readings."""
    import torch
    out = []
    for name, state in before.items():
        now = after.get(name)
        if now is None:
            continue
        if name == "torch":
            same = torch.equal(state, now)
        elif name == "random":
            same = state == now
        else:
            same = state[1] == now[1] and bool((state[0] == now[0]).all())
        if not same:
            out.append(name)
    return out
