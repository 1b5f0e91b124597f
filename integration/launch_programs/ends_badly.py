"""Ends as its first argument says (fork_server_test compares the forked rank's end, stderr and
exit code with an exec'd one's): raise, exit N, or a syntax error in a module it imports."""
import sys


def fail(how):
    if how == "raise":
        raise ValueError("a bad sample in shard %s" % sys.argv[0])
    if how == "syntax":
        import ends_badly_syntax  # noqa: F401
    sys.exit(int(how))


if __name__ == "__main__":
    fail(sys.argv[1])
