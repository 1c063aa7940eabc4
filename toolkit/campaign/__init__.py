"""Campaigns: every (model, effort, seed) run of a leaderboard from one file.

    config.py        the campaign file (campaign.toml), one-line errors naming the field
    plan.py          run keys (track, model, effort, seed) and their state in the results folder
    claims.py        one claim (flock) per run key: never the same run twice at once
    job.py           one run as data, for the run process; its report
    child.py         the run process (`python -m toolkit.campaign.child`): execute_run
    driver.py        what to run, when, how often (attempts); engine-agnostic
    local_engine.py  one run per GPU (or CPU slot) of this box
    ray_engine.py    one Ray task per run on a cluster; results come back as bytes
    collect.py       packing a finished run on a node, unpacking it into the results folder
    view.py          the live view (rich) or plain lines
    setup.py         file + command line -> campaign, inputs, engine

Ray is optional (`pip install -e '.[ray]'`): nothing here imports it until the ray engine runs.
"""
