#!/usr/bin/python3
"""range_server.py -- a local HTTP server for testing jobs/fetch-*.sh without the network.

    /usr/bin/python3 tests/jobs/range_server.py ROOT PORTFILE LOGFILE

Listens on 127.0.0.1 on a free port (written to PORTFILE once ready) and serves files under ROOT
with single byte ranges (Range: bytes=A-, A-B, -N -> 206 / 416), as http.server does not.
It imitates the Hugging Face hub where the fetch scripts depend on it:
  HEAD/GET /ORG/REPO/resolve/REV/FILE  for *.safetensors and *.bin (LFS): 302 to
      /cdn/ORG/REPO/[REV/]FILE with X-Linked-Size and X-Linked-ETag: "<sha256>"; for other
      files: 200 with ETag: "<git blob id>"; both with X-Repo-Commit (the sha1 of REV). The file
      is ROOT/ORG/REPO/REV/FILE when the folder ROOT/ORG/REPO/REV exists (a revision of a
      checkpoint series), else ROOT/ORG/REPO/FILE.
  GET /api/models/ORG/REPO/revision/REV  the file list, {"sha": ..., "siblings": [{"rfilename":
      NAME}, ...]}, of the same folder (its files, not its sub-folders); 404 when there is none.
  /cdn/ORG/REPO/FILE and any other /PATH: ROOT/ORG/REPO/FILE and ROOT/PATH, plain.
Faults, set by GET /_ctl?op=OP&path=SUFFIX[&after=N][&times=K] and applied to the next K (default
1) GETs whose path ends with SUFFIX:
  drop     send the headers for the whole range but only AFTER bytes of the body, then cut the
           connection (an interrupted download)
  corrupt  flip one byte in the middle of the body (a damaged transfer, same size)
  norange  ignore Range and send the whole file with 200
  reset    (no path) forget all faults
Every request is appended to LOGFILE as "METHOD PATH RANGE STATUS".
"""
import hashlib
import json
import http.server
import os
import re
import socket
import sys
import threading
import urllib.parse

ROOT, PORTFILE, LOGFILE = sys.argv[1:4] if len(sys.argv) == 4 else (None, None, None)
ROOT = os.path.abspath(ROOT) if ROOT else None
faults = []          # [op, suffix, after, times_left]
lock = threading.Lock()
RESOLVE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
LISTING = re.compile(r"^/api/models/([^/]+)/([^/]+)/revision/([^/]+)$")


def revision_dir(org, repo, rev):
    """The folder that holds REV of ORG/REPO: ROOT/ORG/REPO/REV when it exists, else the repo's."""
    d = os.path.join(ROOT, org, repo, rev)
    return d if os.path.isdir(d) else os.path.join(ROOT, org, repo)


def commit_of(rev):
    return hashlib.sha1(rev.encode()).hexdigest()


def digests(path):
    data = open(path, "rb").read()
    sha256 = hashlib.sha256(data).hexdigest()
    git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return len(data), sha256, git


def take_fault(path):
    with lock:
        for f in faults:
            if path.endswith(f[1]) and f[3] > 0:
                f[3] -= 1
                return f[0], f[2]
    return None, 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def log(self, status):
        with lock, open(LOGFILE, "a") as f:
            f.write("%s %s %s %s\n" % (self.command, self.path,
                                        self.headers.get("Range", "-"), status))

    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.log(status)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path == "/_ctl":
            q = dict(urllib.parse.parse_qsl(url.query))
            with lock:
                if q.get("op") == "reset":
                    faults.clear()
                else:
                    faults.append([q["op"], q["path"], int(q.get("after", 0)),
                                   int(q.get("times", 1))])
            return self.reply(200, body=b"ok\n")
        m = LISTING.match(path)
        if m:
            d = revision_dir(*m.groups())
            if not os.path.isdir(d):
                return self.reply(404, [("X-Error-Code", "RepoNotFound")], b"Repository not found")
            names = sorted(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))
            doc = {"sha": commit_of(m.group(3)), "siblings": [{"rfilename": n} for n in names]}
            return self.reply(200, [("Content-Type", "application/json")], json.dumps(doc).encode())
        m = RESOLVE.match(path)
        if m:
            org, repo, rev, name = m.groups()
            d = revision_dir(org, repo, rev)
            local = os.path.join(d, name)
            if not os.path.isfile(local):
                return self.reply(404, [("X-Error-Code", "EntryNotFound")], b"Entry not found")
            size, sha256, git = digests(local)
            common = [("X-Repo-Commit", commit_of(rev))]
            if name.endswith((".safetensors", ".bin")):
                return self.reply(302, common + [
                    ("Location", "/cdn/" + os.path.relpath(local, ROOT)),
                    ("X-Linked-Size", str(size)), ("X-Linked-ETag", '"%s"' % sha256)])
            return self.send_file(local, common + [("ETag", '"%s"' % git)])
        rel = path[len("/cdn/"):] if path.startswith("/cdn/") else path.lstrip("/")
        local = os.path.normpath(os.path.join(ROOT, rel))
        if not local.startswith(ROOT + os.sep) or not os.path.isfile(local):
            return self.reply(404, body=b"not found")
        return self.send_file(local, [])

    def send_file(self, local, headers):
        data = open(local, "rb").read()
        size = len(data)
        op, after = take_fault(self.path) if self.command == "GET" else (None, 0)
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and op != "norange":
            m = re.match(r"^bytes=(\d*)-(\d*)$", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                return self.reply(416, [("Content-Range", "bytes */%d" % size)])
            if m.group(1) == "":
                start = max(0, size - int(m.group(2)))
            else:
                start = int(m.group(1))
                if m.group(2):
                    end = min(end, int(m.group(2)))
            if start >= size or start > end:
                return self.reply(416, [("Content-Range", "bytes */%d" % size)])
            status = 206
        body = bytearray(data[start:end + 1])
        if op == "corrupt" and body:
            body[len(body) // 2] ^= 0xFF
        self.send_response(status)
        for k, v in headers + [("Accept-Ranges", "bytes"),
                               ("Content-Type", "application/octet-stream")]:
            self.send_header(k, v)
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return self.log(status)
        if op == "drop":
            self.wfile.write(bytes(body[:after]))
            self.wfile.flush()
            self.log("%d-dropped-after-%d" % (status, after))
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.wfile.write(bytes(body))
        self.log(status)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # clients that hang up mid-transfer (curl giving up on a 200 to a Range request) are
        # part of the tests, not errors of the server
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


def main():
    if ROOT is None:
        sys.stderr.write("usage: range_server.py ROOT PORTFILE LOGFILE\n")
        return 2
    server = Server(("127.0.0.1", 0), Handler)
    tmp = PORTFILE + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, PORTFILE)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
