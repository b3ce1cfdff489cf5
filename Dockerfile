# One image for every process of the stack: the API server (default), the scheduler,
# the controller and the kubelet simulator. docker-compose.yml picks the command per service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DRA_LISTEN=0.0.0.0:6443

WORKDIR /app

# Runtime dependencies only (pyproject's [project.dependencies]; the [test] extra is not installed).
# The source tree stays in /app: alembic.ini, migrations/ and the kubeletsim device profiles are read from it.
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY kube ./kube
COPY schedulers ./schedulers
COPY controllers ./controllers
COPY kubeletsim ./kubeletsim
COPY devtools ./devtools
COPY migrations ./migrations
COPY examples ./examples
RUN pip install --no-cache-dir . \
    && rm -rf build ./*.egg-info \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home dra \
    && mkdir -p /app/data/pki \
    && chown -R dra:dra /app/data

USER dra

EXPOSE 6443

CMD ["python", "-m", "app", "serve"]
