# A CUDA image that runs the Nox sessions on the GPU:
#   docker build -t custom-op --build-arg TORCH_CUDA_ARCH_LIST=9.0 .
#   docker run --rm --gpus all custom-op                   # nox -s test bench
# Behind a TLS-inspecting proxy, pass its CA bundle as a build secret (never a layer):
#   docker build --secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt -t custom-op .
# `nox -s image` builds and runs it (docker, or buildah where no Docker engine runs).
#
# One CUDA toolkit only: the one the lock pins. The base image is plain Debian with Python and
# no CUDA: the environment comes from the repository's locks exactly as the Nox sessions make it
# (conda-lock.yml through py-rattler when it exists, else requirements/venv-lock.txt with the pip
# CUDA 13.0 compiler matched to torch), and the driver comes from the host through the NVIDIA
# container toolkit. A CUDA base image would add a second toolkit whose version could drift from
# the one torch was built with. Nothing is solved at build time: every package comes from a lock,
# hash-checked. No `# syntax=` line: the builder's own Dockerfile frontend (BuildKit's, buildah's)
# has all this file uses, and a frontend image would be one more thing pulled unpinned.
#
# The base is pinned by digest in FROM itself, where Dependabot finds it (.github/dependabot.yml);
# by hand: docker buildx imagetools inspect python:3.11-slim-bookworm

# ---- base: the host compiler nvcc and the JIT build use (Debian bookworm's GCC 12) ----
FROM python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b AS base
# The environments live outside the checkout (CUSTOM_OP_ENVS_DIR), so a checkout mounted at any
# path (the GPU workflow's, a dev container's) reuses them, and HOME is writable for any uid.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CUSTOM_OP_ENVS_DIR=/opt/custom-op/envs HOME=/tmp/home
# Pinned to bookworm's release series, not to one build: a point release or a security update
# replaces a package's exact version on Debian's mirrors (only snapshot.debian.org keeps the old
# one), and apt would then find no version to install. A base on another Debian release needs its
# series here: tests/envs/test_automation.py knows bookworm's and fails for any other codename.
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
    && apt-get update \
    && apt-get install -y --no-install-recommends "g++=4:12.2.*" "git=1:2.39.*" \
    && useradd --create-home --uid 1000 app \
    && install -d -m 1777 /tmp/home \
    && install -d -o 1000 -g 1000 /workspace /opt/custom-op /opt/custom-op/envs
COPY requirements/nox-lock.txt /opt/custom-op/nox-lock.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
    && python -m pip install --require-hashes --only-binary :all: -r /opt/custom-op/nox-lock.txt
WORKDIR /workspace

# ---- env: the shared environment and the tools venv, from the locks only ----
FROM base AS env
# Root only where it must be (base's apt and system pip): the environments are made by the user
# that runs them, in folders that user owns.
USER 1000:1000
# Only what the environments are made from: an edit elsewhere does not rebuild this layer.
# conda-lock.yml is optional (the venv lock is used without it): the pattern copies it when present.
COPY --chown=1000:1000 noxfile.py environment.yml virtual-packages.yml conda-lock.y[m]l ./
COPY --chown=1000:1000 requirements/ requirements/
COPY --chown=1000:1000 tools/__init__.py tools/pip_cuda_toolchain.py tools/build_state.py tools/compute_sanitizer.py \
    tools/pytest_args.py tools/sources.py tools/
COPY --chown=1000:1000 tools/envs/ tools/envs/
COPY --chown=1000:1000 tools/scaffold/examples.py tools/scaffold/
# Package downloads (pip's or uv's, and the conda packages py-rattler fetches) stay in cache mounts,
# out of the layer: the installed environments are complete without them, so the image starts
# offline. uv copies from its cache (another filesystem here) instead of linking to it.
ENV UV_LINK_MODE=copy
RUN --mount=type=cache,target=/tmp/home/.cache,uid=1000,gid=1000 \
    --mount=type=cache,target=/opt/custom-op/envs/pkgs,uid=1000,gid=1000 \
    --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle,uid=1000 \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle SSL_CERT_FILE=/run/secrets/ca_bundle; fi \
    && nox -s env

# ---- build: the library, compiled in place ----
FROM env AS build
ARG TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0;12.0+PTX"
ENV TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} CUSTOM_OP_CUDA=1
COPY --chown=1000:1000 . .
RUN nox -s build

# ---- runtime: non-root, GPU tests and benchmarks by default ----
FROM base AS runtime
ARG TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0;12.0+PTX"
ENV TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} CUSTOM_OP_CUDA=1
# Two layers: the environments (several GB, they change with the locks) and the checkout with its
# built library (small, it changes with every commit).
COPY --from=env --chown=1000:1000 /opt/custom-op/envs /opt/custom-op/envs
COPY --from=build --chown=1000:1000 /workspace /workspace
USER 1000:1000
CMD ["nox", "-s", "test", "bench"]
