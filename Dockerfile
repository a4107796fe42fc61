# A static memcached-operator in a distroless, non-root image, for those who
# build with Docker. `make image` builds the same image without Docker (see
# "The image" in docs/operations.md), and the two have the same files at
# the same paths: the binary at /memcached-operator, run as 65532:65532 from
# /home/nonroot, with /etc/passwd and /etc/group naming that user "nonroot",
# the CA bundle at /etc/ssl/certs/ca-certificates.crt, and /tmp. Here the
# distroless base provides all of them but the binary. Its CA bundle is
# Debian's where make image ships the roots golang.org/x/crypto pins (both
# are Mozilla's), and it has more that the operator does not use: tzdata,
# netbase, nsswitch.conf, os-release and Debian's license files.
# TestDockerfile (hack/tools/cmd/image) checks the lines of the final stage
# that this relies on. Docker does not run on the development machines of
# this project, so this file is not built by CI.
#
#   VERSION="$(make -s print-version)"
#   docker build --build-arg VERSION="$VERSION" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     -t ghcr.io/kubelite/memcached-operator:"$VERSION" .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/memcached-operator .

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="memcached-operator" \
      org.opencontainers.image.description="Kubernetes operator that runs memcached: a Deployment and a headless Service for each Memcached object." \
      org.opencontainers.image.source="https://github.com/kubelite/memcached-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/memcached-operator /memcached-operator
USER 65532:65532
ENTRYPOINT ["/memcached-operator"]
