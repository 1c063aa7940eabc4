"""Which image on this engine a reference names, and whether it is the pinned one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.images import ImageError, split_digest


@dataclass(frozen=True)
class Resolved:
    """An image as the engine has it."""

    ref: str
    """What was asked for."""
    id: str
    """The image id (`sha256:...`, the digest of its config): what a locally built image is."""
    repo_digests: tuple[str, ...]
    """`name@sha256:...` digests from a registry, when it was pushed or pulled."""
    size: int
    role: str | None

    @property
    def digest(self) -> str:
        """What a run records and a pins file holds: `name@sha256:...`, the registry digest if
        the image has one, else the image id under the name it was asked for."""
        if self.repo_digests:
            return self.repo_digests[0]
        name = self.ref.split("@")[0]
        if ":" in name.rsplit("/", 1)[-1]:
            name = name.rsplit(":", 1)[0]
        return f"{name}@{self.id}" if name and not name.startswith("sha256") else self.id


def _inspect(client: Any, ref: str) -> dict[str, Any] | None:
    import docker.errors

    try:
        data: dict[str, Any] = client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if getattr(exc, "status_code", None) in (400, 404):
            return None
        raise
    return data


def resolve(client: Any, ref: str, role: str) -> Resolved:
    """The image `ref` names; for `name@sha256:D`, D must be its id or a registry digest.

    Raises ImageError with one line naming the role, the reference and what to do.
    """
    name, digest = split_digest(ref)
    data = _inspect(client, ref)
    if data is None and digest is not None:
        data = _inspect(client, digest)  # a locally built image: the digest is its id
    if data is None and digest is not None and name:
        others = client.api.images(name=name)
        if others:
            here = ", ".join(f"{(o.get('RepoTags') or [name])[0]} = {o['Id']}" for o in others[:2])
            raise ImageError(
                f"{role} image: the pins want {name}@{digest}, but this engine has {here}: "
                "build or pull the pinned image, or update the pins file"
            )
    if data is None:
        hint = (
            "pull it, or build it with `toolkit images build`"
            if digest
            else "build it with `toolkit images build` (or pass --images with pinned digests)"
        )
        raise ImageError(f"{role} image {ref} is not on this Docker engine: {hint}")
    repo_digests = tuple(data.get("RepoDigests") or ())
    found = Resolved(
        ref=ref,
        id=str(data["Id"]),
        repo_digests=repo_digests,
        size=int(data.get("Size") or 0),
        role=((data.get("Config") or {}).get("Labels") or {}).get("org.ari-bench.role"),
    )
    if digest is not None:
        known = {found.id, *(d.rpartition("@")[2] for d in repo_digests)}
        if digest not in known:
            raise ImageError(
                f"{role} image {name or ref} is {found.digest}, but {ref} is pinned: "
                "build or pull the pinned image, or update the pins file"
            )
    return found
