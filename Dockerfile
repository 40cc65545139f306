# One image for every Python process (web, workers, beat); they differ only in command.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DJANGO_STATIC_ROOT=/app/staticfiles FLASKWEB_VAR_DIR=/app/var
WORKDIR /app

COPY pyproject.toml ./
RUN pip install --upgrade "pip==25.3" && pip install -e . 2>/dev/null || true
COPY . .
RUN pip install -e . \
 && DJANGO_DEBUG=true python manage.py collectstatic --noinput -v0 \
 && useradd --create-home --uid 1000 flaskweb && mkdir -p /app/var && chown -R flaskweb /app/var
USER flaskweb

EXPOSE 8000
CMD ["gunicorn", "flaskweb.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]
