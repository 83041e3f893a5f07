# Loopwarden's image: the server and the client distribution it depends on, installed in one
# command (README, "Deploying beyond one machine"). compose.yaml runs web, worker and beat from it.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir ./clients/python . \
    && useradd --system --home-dir /app loopwarden \
    && mkdir -p /var/lib/loopwarden && chown loopwarden /var/lib/loopwarden
USER loopwarden
# Run from the repository root, so gunicorn reads gunicorn.conf.py.
EXPOSE 8000
CMD ["gunicorn", "loopwarden.wsgi", "-c", "gunicorn.conf.py", "-b", "0.0.0.0:8000"]
