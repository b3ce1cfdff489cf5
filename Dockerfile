# One image for every process of the stack: the API server (default), the scheduler,
# the controller and the kubelet simulator. docker-compose.yml picks the command per service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DRA_LISTEN=0.0.0.0:6443

WORKDIR /app

# Runtime dependencies only (pyproject's [project.dependencies]; the [test] extra is not installed).
# The source tree stays in /app: alembic.ini, migrations/ and the kubeletsim device profiles are read
# from it, and every process runs `python -m PACKAGE` from it. So it holds every package pyproject
# installs (the kubelet simulator imports kubeletapi; `python -m exampledriver` and `kubectl dra`
# run in the image too) and setup.py, which compiles the hot modules (kube/compiled.py).
COPY pyproject.toml setup.py README.md alembic.ini ./
COPY app ./app
COPY kube ./kube
COPY kubeletapi ./kubeletapi
COPY schedulers ./schedulers
COPY controllers ./controllers
COPY kubeletsim ./kubeletsim
COPY exampledriver ./exampledriver
COPY kubectl_dra ./kubectl_dra
COPY devtools ./devtools
COPY migrations ./migrations
COPY examples ./examples
# As the Makefile's venv target: the dependencies first (plain Python), then mypyc compiles the hot
# modules with every dependency's types present, in place (an editable install: the processes import
# the packages from /app, so the extensions must sit next to their sources). The C compiler and mypy
# are there for that step only; the last check fails the build when the compiled modules are not used.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && DRA_PURE_PYTHON=1 pip install --no-cache-dir -e . \
    && pip install --no-cache-dir 'setuptools>=68' 'mypy==2.4.1' \
    && pip install --no-cache-dir --no-build-isolation --no-deps -e . \
    && pip uninstall --yes mypy \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* build \
    && python -c "import sys, kube.compiled, kube.labels, app.api.routing; sys.exit(0 if kube.compiled.ACTIVE else 'the hot modules were not compiled')" \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home dra \
    && mkdir -p /app/data/pki \
    && chown -R dra:dra /app/data

USER dra

EXPOSE 6443

CMD ["python", "-m", "app", "serve"]
