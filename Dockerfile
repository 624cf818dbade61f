# The Zaris node image: `zaris serve`, configured by ZARIS_* environment variables (see
# docs/operations.md), data in the volume /var/lib/zaris, running as the unprivileged user zaris
# (uid/gid 10001).
#
# The binary is built on the host and copied in (no Rust toolchain is fetched inside a build):
#
#   cargo build --release -p zaris
#   docker build -t zaris:dev .
#
# scripts/docker-build.sh does both (it also strips the binary and, on a machine without a
# registry, builds the base image with scripts/base-image.sh first). Another binary:
# --build-arg ZARIS_BIN=path/inside/the/context (and let it through .dockerignore).
FROM debian:bookworm-slim

ARG ZARIS_BIN=target/release/zaris
ARG ZARIS_VERSION=unknown

LABEL org.opencontainers.image.title="zaris" \
      org.opencontainers.image.description="Zaris: a Raft-replicated lease store (leases, lease-bound keys, fenced locks)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${ZARIS_VERSION}"

# The user, and the data directory it owns: a new named volume mounted there starts as a copy of
# it, owner and mode included.
RUN groupadd --system --gid 10001 zaris \
    && useradd --no-log-init --uid 10001 --gid zaris --home-dir /var/lib/zaris \
        --no-create-home --shell /usr/sbin/nologin zaris \
    && mkdir -p /var/lib/zaris \
    && chown zaris:zaris /var/lib/zaris \
    && chmod 0700 /var/lib/zaris

COPY ${ZARIS_BIN} /usr/local/bin/zaris

# Listen on every interface of the container: 7001 for clients, 7101 for Raft peers (the peer
# listener's default on the client listener's IP), 9001 for /metrics, /health and /ready (the
# ports docs/operations.md uses for node 1). A cluster member
# also needs ZARIS_NODE_ID and ZARIS_INITIAL_CLUSTER (or ZARIS_JOIN=true); a single node that
# may grow later should set ZARIS_ADVERTISE (otherwise it records the container's host name).
ENV ZARIS_LISTEN=0.0.0.0:7001 \
    ZARIS_HTTP=0.0.0.0:9001 \
    ZARIS_DATA_DIR=/var/lib/zaris

VOLUME ["/var/lib/zaris"]
WORKDIR /var/lib/zaris
EXPOSE 7001 7101 9001
USER 10001:10001

# Healthy while GET /ready on the HTTP port answers 200: a leader acknowledged by a quorum, or a
# follower that knows a leader. bash's /dev/tcp speaks the HTTP, so no curl in the image.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
    CMD ["bash", "-c", "exec 3<>\"/dev/tcp/127.0.0.1/${ZARIS_HTTP##*:}\" && printf 'GET /ready HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && read -r -t 2 _ code _ <&3 && [ \"$code\" = 200 ]"]

# zaris is PID 1 and gets SIGTERM itself (no shell in between): it stops serving, shuts Raft
# down and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/zaris", "serve"]
