#!/usr/bin/env python3
"""A loopback stand-in for the Hugging Face Hub's file endpoints, as its documentation and the
hub itself answer them, for Kerf's `models pull` tests (CLI and window).

  GET  /api/models/OWNER/NAME[/revision/REV][?blobs=true]   the repository and its files
                                                             (`siblings`, each LFS file with
                                                             `lfs.sha256` and `lfs.size`)
  GET|HEAD /OWNER/NAME/resolve/REV/FILE                      302 to the file's content address,
                                                             with X-Repo-Commit, X-Linked-Etag
                                                             (the SHA-256) and X-Linked-Size
  GET|HEAD /cdn/SHA256                                       the bytes; `Range: bytes=A-[B]` gives
                                                             206 with Content-Range

Errors as the hub gives them: 404 with X-Error-Code RepoNotFound or EntryNotFound, 401 with
X-Error-Code GatedRepo for a gated repository without the right `Authorization: Bearer`.

  hub.py --serve OWNER/NAME:FILE=PATH ... [--gated OWNER/NAME --token T]
         [--cut-after BYTES] [--wrong-sha OWNER/NAME:FILE] [--log FILE]

Prints `port N` once listening. --cut-after: the first download of each file that asks for more
than a byte sends the full Content-Length, then only that many bytes, then closes the connection.
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import sys
import threading

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="append", default=[])
    ap.add_argument("--gated", action="append", default=[])
    ap.add_argument("--token")
    ap.add_argument("--cut-after", type=int)
    ap.add_argument("--wrong-sha", action="append", default=[])
    ap.add_argument("--log")
    args = ap.parse_args()

    repos = {}  # repo -> {file: (path, sha, size)}
    blobs = {}  # sha -> path
    for s in args.serve:
        spec, path = s.split("=", 1)
        repo, name = spec.split(":", 1)
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        sha = h.hexdigest()
        blobs[sha] = path
        said = "0" * 64 if spec in args.wrong_sha else sha
        repos.setdefault(repo, {})[name] = (path, said, sha, os.path.getsize(path))
    cut_done = set()
    lock = threading.Lock()

    class Hub(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            if args.log:
                with lock, open(args.log, "a") as f:
                    f.write(f"{self.command} {self.path} range={self.headers.get('Range', '')}\n")

        def error(self, status, code, message):
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def refused(self, repo):
            if repo in args.gated and self.headers.get("Authorization") != f"Bearer {args.token}":
                self.error(401, "GatedRepo", f"Access to model {repo} is restricted. You must have access to it and be authenticated to access it.")
                return True
            return False

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
            if m:
                repo = m.group(1)
                if repo not in repos:
                    return self.error(404, "RepoNotFound", "Repository not found")
                if self.refused(repo):
                    return
                siblings = [{"rfilename": "README.md", "size": 120}] + [
                    {"rfilename": name, "size": size, "lfs": {"sha256": said, "size": size, "pointerSize": 135}}
                    for name, (_, said, _, size) in sorted(repos[repo].items())
                ]
                body = json.dumps({"id": repo, "sha": COMMIT, "gated": "manual" if repo in args.gated else False,
                                   "siblings": siblings}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if m:
                repo, name = m.group(1), m.group(3)
                if repo not in repos:
                    return self.error(404, "RepoNotFound", "Repository not found")
                if self.refused(repo):
                    return
                if name not in repos[repo]:
                    return self.error(404, "EntryNotFound", f"{name} does not exist on \"main\"")
                _, said, sha, size = repos[repo][name]
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/cdn/{sha}")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("X-Linked-Etag", f'"{said}"')
                self.send_header("ETag", f'"{said}"')
                self.send_header("X-Linked-Size", str(size))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            m = re.fullmatch(r"/cdn/([0-9a-f]{64})", path)
            if m and m.group(1) in blobs:
                sha = m.group(1)
                blob = blobs[sha]
                size = os.path.getsize(blob)
                start, end = 0, size - 1
                rng = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if rng:
                    start = int(rng.group(1))
                    end = min(int(rng.group(2)), size - 1) if rng.group(2) else size - 1
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                else:
                    self.send_response(200)
                self.send_header("ETag", f'"{sha}"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                if self.command == "HEAD":
                    return
                cut = None
                with lock:
                    if args.cut_after is not None and end > start and sha not in cut_done:
                        cut_done.add(sha)
                        cut = args.cut_after
                with open(blob, "rb") as f:
                    f.seek(start)
                    left = end - start + 1 if cut is None else min(cut, end - start + 1)
                    while left > 0:
                        chunk = f.read(min(1 << 20, left))
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        left -= len(chunk)
                if cut is not None:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                return
            self.error(404, "EntryNotFound", "not found")

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            # A client that goes away mid-download (a full disk, a test's cut) is expected.
            if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Hub)
    print(f"port {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
