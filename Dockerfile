# The tide container image: the static linux binary that scripts/release
# builds, and nothing else (no shell, no libc). Build it with `make image`,
# which lays out the build context in out/image (the binary as tide, the
# licences, the CA certificates for TLS, an empty data directory).
FROM scratch

COPY tide /tide
COPY LICENSE NOTICE THIRD_PARTY_LICENSES.txt /licenses/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# The data directory, owned by the user tide runs as: checkpoints and
# file sinks write here unless the pipeline file says otherwise.
COPY --chown=65532:65532 data /data

USER 65532:65532
WORKDIR /data
VOLUME /data

# 9464: the status page, /api/status and /metrics (tide run --http-addr
# :9464); 27017: the embedded MongoDB-compatible server (tide serve --addr
# :27017).
EXPOSE 9464 27017

# No curl in a scratch image: tide checks itself, with one GET of
# http://127.0.0.1:9464/healthz (see `tide healthcheck --help`).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
	CMD ["/tide", "healthcheck"]

ENTRYPOINT ["/tide"]
CMD ["--help"]
