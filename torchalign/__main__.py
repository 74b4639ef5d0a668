"""``python -m torchalign``: the command line (a search goes to a listening server, as the
console script's does)."""

import sys

from torchalign_client import entry

if __name__ == "__main__":
    sys.exit(entry())
