"""Ends as its first argument says (fork_server_test compares the forked rank's end, stderr and
exit code with an exec'd one's): raise, exit N, a syntax error in a module it imports, or
leave-open PATH: a line written to PATH through a file never closed (Python flushes it at exit)."""
import sys

_kept = []


def fail(how):
    if how == "raise":
        raise ValueError("a bad sample in shard %s" % sys.argv[0])
    if how == "syntax":
        import ends_badly_syntax  # noqa: F401
    if how == "leave-open":
        _kept.append(open(sys.argv[2], "w"))
        _kept[0].write("written, never closed\n")
        return
    sys.exit(int(how))


if __name__ == "__main__":
    fail(sys.argv[1])
