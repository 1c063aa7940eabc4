"""Training text: what the agent trains on.

- `corpus`: the default corpus, ordinary English prose that installs offline;
- `data`: any common text source turned into a byte-level train/validation split.
"""
