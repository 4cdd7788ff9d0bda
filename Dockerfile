# syntax=docker/dockerfile:1
# The service's container image: the production directory (`npx -y pnpm@10 deploy:dir`) on a slim
# Node 22 base. The build stage runs the same command, with the same paths inside the directory, as
# packages/cli/test/deploy-dir.test.ts, which builds the directory, moves it and runs it; the
# Dockerfile test holds the two together. Operations guide, section 13.
#
# Node 22 LTS, not 24: better-sqlite3 12, the SQLite driver, aborts Node 24 processes (README). The
# version is pinned so that a rebuild gives the same runtime; both stages use the same one, because
# better-sqlite3's native addon is compiled for that Node's ABI and Debian's glibc.
ARG NODE_VERSION=22.23.3

FROM node:${NODE_VERSION}-bookworm AS build
WORKDIR /src
# The full image has python3, make and g++ for better-sqlite3 when no prebuilt binary matches.
COPY . .
RUN npx -y pnpm@10 install --frozen-lockfile \
 && npx -y pnpm@10 deploy:dir /out

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    OPS_HOST=0.0.0.0 \
    OPS_PORT=9464 \
    DATABASE_URL=sqlite:/data/cos.sqlite
# Root owns the application (read-only to the service); the service's user owns only /data, the
# embedded SQLite default's directory (a volume). Nothing else is written: the root filesystem can
# be read-only, with /tmp a tmpfs for Node's own temporary files.
COPY --from=build /out /app
RUN mkdir /data && chown 10001:10001 /data
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 3000 9464
# The operations listener's liveness probe (no dependency touched), with the Node of the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.OPS_PORT + '/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# serve's primary is node itself and drains on SIGTERM/SIGINT; run it with `docker run --init`
# (Compose: `init: true`) for a reaper as PID 1, as deploy/compose.yaml does.
ENTRYPOINT ["/app/bin/cos-admin"]
CMD ["serve"]
