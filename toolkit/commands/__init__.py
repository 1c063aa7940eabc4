"""One module per `toolkit` command; each is registered in `toolkit/cli.py`."""
