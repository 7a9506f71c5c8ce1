"""Starts `edgevl serve` on a free loopback port for the scripts that drive it (tests, checks,
benchmarks): waits until /health answers 200. Standard library only."""
import http.client
import os
import subprocess
import tempfile
import time


class EdgevlServer:
    def __init__(self, edgevl, model, *args):
        self.tmp = tempfile.mkdtemp()
        port_file = os.path.join(self.tmp, "port")
        self.log_path = os.path.join(self.tmp, "server.log")
        self.proc = subprocess.Popen([edgevl, "serve", "-m", model, "--port", "0", "--port-file", port_file,
                                      *[str(a) for a in args]], stderr=open(self.log_path, "w"))
        for _ in range(3000):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("edgevl serve exited: " + open(self.log_path).read())
            time.sleep(0.01)
        self.port = int(open(port_file).read())
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(30000):
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("edgevl serve exited: " + open(self.log_path).read())
            time.sleep(0.01)
        raise RuntimeError("edgevl serve did not become ready")

    def close(self):
        self.proc.terminate()
        return self.proc.wait(timeout=60)
