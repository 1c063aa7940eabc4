"""The runner service and the agent's `runner` command (see `service` and `client`)."""
