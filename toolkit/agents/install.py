"""`python -m toolkit.agents.install`: install the pinned opencode scaffold (see `scaffold`)."""

from toolkit.agents.scaffold import main

if __name__ == "__main__":
    main()
