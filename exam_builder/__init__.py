"""The ARI Bench exam engine: families, banks, masking, canonical exam files and hashing."""

BUILDER_VERSION = "1.0.0"
