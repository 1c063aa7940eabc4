# The egress proxy image: a small TCP forwarder (egress.py, standard library only) that relays
# a controller's connections to its model provider's (host, port) and nowhere else.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS init
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY ari-init.c /src/ari-init.c
RUN gcc -static -O2 -o /ari-init /src/ari-init.c

FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man
COPY egress.py /usr/local/lib/ari/egress.py
COPY --from=init /ari-init /usr/local/sbin/ari-init
LABEL org.ari-bench.role=proxy
