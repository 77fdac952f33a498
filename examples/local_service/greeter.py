"""The greeter, the program the local_service operator deploys: it answers every GET with its
greeting ($GREETING) and its pod's name, on its pod's address ($POD_IP) and port 8080.

On kubeloop's process node it runs as the image ``example.com/greeter``:
``--local-image "example.com/greeter=python examples/local_service/greeter.py"``.
"""

import os
from http.server import BaseHTTPRequestHandler, HTTPServer


class Greet(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{os.environ.get('GREETING', 'hello')} from {os.environ.get('HOSTNAME', 'nowhere')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    HTTPServer((os.environ.get("POD_IP", "127.0.0.1"), 8080), Greet).serve_forever()
