# The runner image (also the grader's): Python 3.11, PyTorch 2.13.0 and numpy; nothing else.
# Built by `toolkit images build` (see toolkit/images/build.py), which puts into the context
# `site/` (torch + numpy installed on the host with `pip install --target`, so the build needs
# no package index for them) and `ari-init.c`. BASE must be Debian 12 (its python3 is 3.11).
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS init
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY ari-init.c /src/ari-init.c
RUN gcc -static -O2 -o /ari-init /src/ari-init.c

FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python-is-python3 \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man
COPY site/ /usr/local/lib/python3.11/dist-packages/
# Bytecode now: at run time the image is read-only, and importing torch from source each time
# would cost tens of seconds per process. (A few files in these packages are templates, not
# Python: compileall reports them and goes on, so its status is not the build's.)
RUN python3 -m compileall -q -j 0 /usr/local/lib/python3.11/dist-packages >/dev/null || true
COPY --from=init /ari-init /usr/local/sbin/ari-init
RUN python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
ARG TORCH=cpu
LABEL org.ari-bench.role=runner org.ari-bench.torch=${TORCH}
