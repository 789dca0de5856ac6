# The image the validator's docker backend runs candidates in (`--sandbox docker`).
# Build from the repository root:  docker build -f docker/validator.Dockerfile -t openadapt-validator:latest .
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends libseccomp2 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /src/
COPY openadapt /src/openadapt
RUN pip install --no-cache-dir /src && rm -rf /src
USER 65534:65534
WORKDIR /tmp
