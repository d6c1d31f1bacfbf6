"""TCP and UDP echo servers and their clients, for examples/tls-tcp-udp/run.sh.

  echo.py serve-tcp PORT NAME     answer each line with "NAME: <line>"
  echo.py serve-udp PORT NAME     answer each datagram with "NAME: <datagram>"
  echo.py tcp HOST PORT TEXT      send TEXT as a line, print the answer
  echo.py udp HOST PORT TEXT      send TEXT as a datagram, print the answer
"""
import socket
import socketserver
import sys


def serve_tcp(port, name):
    class Echo(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                self.wfile.write(f"{name}: {line.decode(errors='replace').rstrip()}\n".encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), Echo) as server:
        server.serve_forever()


def serve_udp(port, name):
    class Echo(socketserver.DatagramRequestHandler):
        def handle(self):
            self.wfile.write(f"{name}: {self.rfile.read().decode(errors='replace')}".encode())

    with socketserver.UDPServer(("127.0.0.1", port), Echo) as server:
        server.serve_forever()


def ask_tcp(host, port, text):
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(f"{text}\n".encode())
        print(s.makefile().readline().rstrip())


def ask_udp(host, port, text):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(text.encode(), (host, port))
        print(s.recvfrom(2048)[0].decode())


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    if what == "serve-tcp":
        serve_tcp(int(args[0]), args[1])
    elif what == "serve-udp":
        serve_udp(int(args[0]), args[1])
    elif what == "tcp":
        ask_tcp(args[0], int(args[1]), args[2])
    elif what == "udp":
        ask_udp(args[0], int(args[1]), args[2])
    else:
        sys.exit(__doc__)
