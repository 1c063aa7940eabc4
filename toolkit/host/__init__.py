"""The host a run stands on: can it run a track validly?

- `doctor`: one check per need of a track (cgroups, namespaces, GPU, disk...), each with a fix;
- `floor`: the isolation floor a track demands, checked before a run starts and recorded after.
"""
