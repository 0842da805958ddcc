"""A container's program for kubesim's process runtime tests: reports what the kubelet gave it, then
behaves as `MODE` says.

It writes /mnt/out/report-<start>.json (a hostPath volume): its environment, host name, the files
under the paths the test names in `READ`, how `LOOKUP` names resolve, and what the API server answered
its in-cluster request. Then, by MODE: `serve` answers HTTP on 8080 until SIGTERM (exit 0); `crash-once`
exits 3 on its first start and serves afterwards; `stubborn` serves and ignores SIGTERM.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path

SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")
OUT = Path("/mnt/out")


def api_answer() -> dict[str, object]:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not (SA / "token").exists():
        return {"error": "not in a cluster"}
    context = ssl.create_default_context(cafile=str(SA / "ca.crt"))
    namespace = (SA / "namespace").read_text()
    request = urllib.request.Request(
        f"https://{host}:{port}/api/v1/namespaces/{namespace}/configmaps",
        headers={"Authorization": f"Bearer {(SA / 'token').read_text()}"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as answer:
            return {"status": answer.status}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": json.loads(exc.read())}
    except OSError as exc:
        return {"error": str(exc)}


def report() -> int:
    starts = len(list(OUT.glob("report-*.json")))
    files = {}
    for path in filter(None, os.environ.get("READ", "").split(",")):
        target = Path(path)
        files[path] = target.read_text() if target.is_file() else sorted(p.name for p in target.iterdir())
    lookups = {}
    for name in filter(None, os.environ.get("LOOKUP", "").split(",")):
        try:
            lookups[name] = socket.gethostbyname(name)
        except OSError as exc:
            lookups[name] = f"error: {exc}"
    data = {
        "env": dict(os.environ),
        "hostname": socket.gethostname(),
        "cwd": os.getcwd(),
        "files": files,
        "lookups": lookups,
        "api": api_answer(),
        "pid": os.getpid(),
    }
    (OUT / f"report-{starts}.json").write_text(json.dumps(data))
    return starts


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    mode = os.environ.get("MODE", "serve")
    starts = report()
    print(f"start {starts}", flush=True)
    if mode == "crash-once" and starts == 0:
        return 3
    stop = threading.Event()
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, lambda *_: None)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (OUT / f"serving-{starts}").touch()
    stop.wait()
    server.shutdown()
    (OUT / "stopped").touch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
