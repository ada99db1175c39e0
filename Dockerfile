# irdma-emu in a container: the daemon plus Debian's rdma-core tools, so
# that `docker run --rm -it irdma-emu` starts a device irdma0 on the
# container's loopback, and `docker exec … irdma-emu exec -- ibv_devinfo`
# runs unmodified programs against it. Run with --cap-add NET_RAW (AF_PACKET
# receive verifies every ICRC; without it the daemon falls back to UDP
# receive, docs/transport.md).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/irdma-emu ./cmd/irdma-emu

FROM debian:bookworm-slim
# gcc and libc6-dev build the preload on first use of `irdma-emu exec`;
# the rest are the programs users run through it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev ibverbs-utils ibverbs-providers perftest rdmacm-utils librdmacm1 iproute2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/irdma-emu /usr/local/bin/irdma-emu
ENTRYPOINT ["irdma-emu"]
CMD ["run"]
