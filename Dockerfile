# Loopwarden's image: the server and the client distribution it depends on, installed in one
# command (README, "Deploying beyond one machine"). compose.yaml runs web, worker and beat from it.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY . /app
# The data folder, and the folder compose mounts the "static" volume at: a volume mounted over
# a folder the image made takes its owner (over none, it would be root's, and collectstatic,
# run as loopwarden, could not write to it).
RUN pip install --no-cache-dir ./clients/python . \
    && useradd --system --home-dir /app loopwarden \
    && mkdir -p /var/lib/loopwarden/staticfiles && chown -R loopwarden /var/lib/loopwarden
USER loopwarden
# Run from the repository root, so gunicorn reads gunicorn.conf.py.
EXPOSE 8000
CMD ["gunicorn", "loopwarden.wsgi", "-c", "gunicorn.conf.py", "-b", "0.0.0.0:8000"]
