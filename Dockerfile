# A static memcached-operator in a distroless, non-root image. It runs the
# same build as `make build`. Docker is not available on the development
# machines of this project, so this file is not exercised by CI.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/memcached-operator .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/memcached-operator /memcached-operator
USER 65532:65532
ENTRYPOINT ["/memcached-operator"]
