# Container image of lightning-store (the Helm chart's default image).
#
# Build it with one command from the repository root (Podman or Docker):
#   tools/image.sh            # -> localhost/lightning-store:<the crate's version>
# tools/image.sh runs `cargo build --release --locked --bin lightning-store`
# (about 14 minutes on 2 cores from a cold target/), then assembles the build
# context this file expects and runs `podman build` (or `docker build`) on it:
#   rootfs/usr/local/bin/lightning-store   the release binary
#   rootfs/lib*/...                        the few libraries it links (glibc's
#                                          libc, libm, libgcc_s and the loader,
#                                          as `ldd` lists them), from the build host
#   rootfs/bin/busybox and its links       Debian's busybox-static (a shell, sed,
#                                          grep for `helm test` and `kubectl exec`)
#   rootfs/etc/ssl/certs/ca-certificates.crt  the host's CA bundle (Debian's
#                                          ca-certificates), for a database URL's
#                                          `sslrootcert` (the binary also carries
#                                          the public web roots)
#   rootfs/etc/passwd, rootfs/etc/group   root and lightning-store (uid/gid 10001)
#   data/                                  the empty data directory
# So the image comes from the repository, the crates and Debian's packages
# alone: no base image, nothing pulled from a container registry.
#
# Run it (a non-loopback listen address needs tokens, docs/security.md):
#   podman run --rm -p 4747:4747 -p 9464:9464 -v lsdata:/var/lib/lightning-store \
#     -e LIGHTNING_STORE_API_KEY="$(openssl rand -hex 24)" \
#     localhost/lightning-store:0.1.0 \
#     serve --listen 0.0.0.0:4747 --metrics-listen 0.0.0.0:9464
# LIGHTNING_STORE_API_KEY is one admin token; LIGHTNING_STORE_TOKENS_FILE names
# a file of them; --insecure serves a throwaway store without any. Without one
# of these the server refuses a non-loopback address.
FROM scratch

COPY rootfs/ /
COPY --chown=10001:10001 data/ /var/lib/lightning-store/

LABEL org.opencontainers.image.title="lightning-store" \
      org.opencontainers.image.description="agent-lightning's LightningStore as a gRPC service" \
      org.opencontainers.image.source="https://github.com/lightning-store/lightning-store" \
      org.opencontainers.image.licenses="MIT"

USER 10001:10001
WORKDIR /var/lib/lightning-store
# The SQLite database (the default backend) lives in the data directory.
ENV PATH=/usr/local/bin:/bin \
    LIGHTNING_STORE_DATABASE=/var/lib/lightning-store/lightning-store.db \
    LIGHTNING_STORE_LOG_FORMAT=json
VOLUME ["/var/lib/lightning-store"]
# 4747: gRPC (store, OTLP traces, grpc.health.v1, reflection, /healthz);
# 9464: Prometheus /metrics when --metrics-listen asks for it.
EXPOSE 4747 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/lightning-store"]
CMD ["serve", "--listen", "0.0.0.0:4747"]
