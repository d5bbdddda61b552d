"""`perftracker` / `c4d_perftracker` when installed with pip: runs the C binary shipped in
the package (perftracker/bin/perftracker) with the same arguments."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "perftracker")
    if not os.access(binary, os.X_OK):
        sys.stderr.write("perftracker: the binary %s is missing (reinstall the package)\n" % binary)
        return 1
    os.execv(binary, [os.path.basename(sys.argv[0]) or "perftracker"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
