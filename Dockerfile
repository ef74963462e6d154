# syntax=docker/dockerfile:1
# Container image of lightning-store (the Helm chart's default image).
#   docker build -t ghcr.io/lightning-store/lightning-store:0.1.0 .
#   docker run --rm -p 4747:4747 -p 9464:9464 -v lsdata:/var/lib/lightning-store \
#     -e LIGHTNING_STORE_API_KEY="$(openssl rand -hex 24)" \
#     ghcr.io/lightning-store/lightning-store:0.1.0 \
#     serve --listen 0.0.0.0:4747 --metrics-listen 0.0.0.0:9464
# A non-loopback listen address needs tokens (LIGHTNING_STORE_API_KEY is one
# admin token; LIGHTNING_STORE_TOKENS_FILE a file of them, docs/security.md),
# or --insecure for a throwaway store: without either the server refuses to start.

# --- build -------------------------------------------------------------------
FROM rust:1.95-bookworm AS builder
WORKDIR /src
# Protobufs compile with protox (pure Rust), SQLite is bundled and jemalloc (the
# binary's allocator) builds from source with the image's cc and make: no system
# packages needed beyond the Rust image.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY migrations ./migrations
COPY src ./src
# The registry and target caches persist between builds (BuildKit); the binary
# is copied out of the cache mount in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin lightning-store \
 && install -D -m 0755 target/release/lightning-store /out/lightning-store

# --- runtime -----------------------------------------------------------------
FROM debian:bookworm-slim
ARG UID=10001
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid "${UID}" lightning-store \
 && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home \
      --home-dir /var/lib/lightning-store --shell /usr/sbin/nologin lightning-store \
 && install -d -o "${UID}" -g "${UID}" -m 0750 /var/lib/lightning-store
COPY --from=builder /out/lightning-store /usr/local/bin/lightning-store

LABEL org.opencontainers.image.title="lightning-store" \
      org.opencontainers.image.description="agent-lightning's LightningStore as a gRPC service" \
      org.opencontainers.image.source="https://github.com/lightning-store/lightning-store" \
      org.opencontainers.image.licenses="MIT"

USER 10001:10001
WORKDIR /var/lib/lightning-store
# The SQLite database (the default backend) lives in the data directory.
ENV LIGHTNING_STORE_DATABASE=/var/lib/lightning-store/lightning-store.db \
    LIGHTNING_STORE_LOG_FORMAT=json
VOLUME ["/var/lib/lightning-store"]
# 4747: gRPC (store, OTLP traces, grpc.health.v1, reflection); 9464: Prometheus /metrics.
EXPOSE 4747 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["lightning-store"]
CMD ["serve", "--listen", "0.0.0.0:4747"]
