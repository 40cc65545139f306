# One image for every Python process (web, workers, beat); they differ only in command.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DJANGO_STATIC_ROOT=/app/staticfiles FLASKWEB_VAR_DIR=/app/var
WORKDIR /app

# pg_dump, pg_restore and psql for `manage.py backup` and `restore` (docs/SERVING.md
# "Backups and restores"): Debian bookworm's are PostgreSQL 15, the server docker-compose.yml
# runs; a newer server needs that version's client (postgresql-client-N from PostgreSQL's apt
# repository).
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-client \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first (pinned in pyproject.toml), so code changes reuse this layer.
COPY pyproject.toml ./
RUN pip install --upgrade "pip==25.3" \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt
COPY . .
# Manifest storage needs DEBUG off; the key is only used by this build step.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
 && useradd --create-home --uid 1000 flaskweb && mkdir -p /app/var && chown -R flaskweb /app/var
USER flaskweb

EXPOSE 8000
# gunicorn reads ./gunicorn.conf.py: the one web recipe (README "Production")
CMD ["gunicorn", "flaskweb.wsgi:application"]
