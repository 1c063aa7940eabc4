# The controller image: the agent's shell. Shell tools and git, and deliberately no Python and
# no GPU libraries: compute goes through `runner`. The `runner` client and the agent's own
# files come in with the workspace (a bind mount); ari-init is PID 1 and wraps every command.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS init
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY ari-init.c /src/ari-init.c
RUN gcc -static -O2 -o /ari-init /src/ari-init.c

FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends \
        bash ca-certificates curl file git jq less patch procps ripgrep xz-utils \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man \
    && if ls /usr/bin/python* /usr/local/bin/python* 2>/dev/null; then \
        echo "the controller image must not contain Python" >&2; exit 1; fi
COPY --from=init /ari-init /usr/local/sbin/ari-init
LABEL org.ari-bench.role=controller
