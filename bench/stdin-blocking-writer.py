"""stdin through the attach socket by a writer outside Node: blocking `socket.sendall` in a loop,
no event loop, no client library, no thread hand-off. `bench/one.mjs stdin blocking` runs it to
show what the engine takes when the client spends little CPU per write beyond the kernel's copy
(on 2 cores the client and the engine share the CPU). Creates, attaches, starts, feeds, waits
for and removes its own container, as the other contenders do; prints one JSON line: seconds and
CPU seconds (this process) from the first write to the exit.

    python3 bench/stdin-blocking-writer.py '<json: socket, image, user, cmd, hostConfig, bytes, writeBytes>'
"""

import http.client
import json
import resource
import socket
import sys
import time


class EngineConnection(http.client.HTTPConnection):
    """HTTP over the engine's Unix socket."""

    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(path, method, url, body=None):
    connection = EngineConnection(path)
    try:
        payload = None if body is None else json.dumps(body)
        connection.request(method, url, body=payload, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {url} answered {response.status}: {text!r}")
        return json.loads(text) if text else None
    finally:
        connection.close()


def attach(path, container):
    """The container's attach socket, upgraded by hand; the answer's head read to its end."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        sock.sendall(
            f"POST /containers/{container}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
            "Host: localhost\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            piece = sock.recv(4096)
            if not piece:
                raise RuntimeError("the attach answer ended inside its head")
            head += piece
        status = head.split(b"\r\n", 1)[0]
        if status.split()[1:2] != [b"101"]:
            raise RuntimeError(f"attach answered {status!r}")
        return sock
    except BaseException:
        sock.close()
        raise


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main():
    config = json.loads(sys.argv[1])
    path = config["socket"]
    created = call(
        path,
        "POST",
        "/containers/create",
        {
            "Image": config["image"],
            "Cmd": config["cmd"],
            "User": config["user"],
            "AttachStdin": True,
            "AttachStdout": True,
            "AttachStderr": True,
            "OpenStdin": True,
            "StdinOnce": True,
            "HostConfig": config["hostConfig"],
        },
    )
    container = created["Id"]
    try:
        sock = attach(path, container)
        try:
            call(path, "POST", f"/containers/{container}/start")
            block = b"\x01" * config["writeBytes"]
            total = config["bytes"]
            cpu = cpu_seconds()
            t0 = time.perf_counter()
            sent = 0
            while sent < total:
                piece = block if total - sent >= len(block) else block[: total - sent]
                sock.sendall(piece)
                sent += len(piece)
            sock.shutdown(socket.SHUT_WR)
            waited = call(path, "POST", f"/containers/{container}/wait")
            seconds = time.perf_counter() - t0
            used = cpu_seconds() - cpu
        finally:
            sock.close()
        if not waited or waited.get("StatusCode") != 0:
            raise RuntimeError(f"blocking cat ended {waited}")
        print(json.dumps({"seconds": seconds, "cpuSeconds": used}))
    finally:
        # A failed removal during a failure keeps that failure as its context: both are printed.
        call(path, "DELETE", f"/containers/{container}?force=1")


main()
