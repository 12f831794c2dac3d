# syntax=docker/dockerfile:1
# The machine-controller image: build with `docker build -t machine-controller:0.1.0 .`

# Stage 1: build the mcm wheel (build tools stay in this stage).
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2.post1
COPY pyproject.toml README.md ./
COPY mcm ./mcm
RUN python -m build --wheel --outdir /wheels

# Stage 2: the runtime image: the wheel and its dependencies, a non-root user, nothing else.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && groupadd --system --gid 65532 mcm \
    && useradd --system --uid 65532 --gid mcm --no-create-home --shell /usr/sbin/nologin mcm
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["machine-controller"]
