# syntax=docker/dockerfile:1
# The machine-controller image: build with `docker build -t machine-controller:0.1.0 .`
#
# Every Python package comes from the lock (requirements/, written by hack/lock.sh): the build
# tools from build.txt, the runtime dependencies from runtime.txt, both with their hashes, and mcm
# itself with --no-deps; the same commit builds the same packages.
#
# The base image is pinned by tag (python:3.11-slim), not yet by digest: the repository is
# written where no Docker engine or image registry can be reached, so no digest could be read or
# verified here, and a wrong one would break every build. To pin it, where a registry is
# reachable, read the digest of the tag and put it after the tag in both FROM lines, e.g.
#   docker buildx imagetools inspect python:3.11-slim      (the "Digest:" line)
#   FROM python:3.11-slim@sha256:<that digest> AS build
# and refresh it as the base image gets security updates (a digest pins them out too).

# Stage 1: build the mcm wheel (build tools stay in this stage).
FROM python:3.11-slim AS build
WORKDIR /src
COPY requirements/build.txt requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/build.txt
COPY pyproject.toml README.md LICENSE NOTICE ./
COPY mcm ./mcm
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

# Stage 2: the runtime image: the locked dependencies and the wheel, a non-root user, nothing else.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements/runtime.txt /tmp/requirements.txt
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --require-hashes -r /tmp/requirements.txt \
    && pip install --no-cache-dir --no-deps /wheels/*.whl \
    && rm -rf /wheels /tmp/requirements.txt \
    && groupadd --system --gid 65532 mcm \
    && useradd --system --uid 65532 --gid mcm --no-create-home --shell /usr/sbin/nologin mcm
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["machine-controller"]
