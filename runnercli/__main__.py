"""`python -m runnercli …`"""

from __future__ import annotations

from runnercli.cli import main

if __name__ == "__main__":
    main()
