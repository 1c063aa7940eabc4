"""The docker backend: a sandbox is one container, and every command a `docker exec` in it.

    sandbox.py  DockerSandbox and its `create` (the backend's `SandboxFactory`)
    process.py  DockerProcess: one command, streamed through the engine's hijacked socket
    engine.py   the connection to the engine, labels, leftovers, the engine's GPU mode
    egress.py   the egress allow-list: an internal network and a forwarder container

The images it runs are built from `toolkit/images/`. Module names carry no leading underscore
(the folder is the backend's boundary). Other parts of the toolkit import `DockerSandbox` from
here and, where they talk to the engine themselves, `engine` (`toolkit doctor`, `toolkit images`,
recovery) and `egress` (the relay's upstream network). Nothing here imports the local backend.
"""

from toolkit.sandbox.docker.sandbox import DockerSandbox, create

__all__ = ["DockerSandbox", "create"]
