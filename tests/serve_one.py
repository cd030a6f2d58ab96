"""One app process for the multi-process tests: the service configured by MEMKIT_*
variables, on a loopback port chosen by the OS (printed as ``PORT <n>`` once it listens)."""

from werkzeug.serving import make_server

from server import create_app

if __name__ == "__main__":
    server = make_server("127.0.0.1", 0, create_app(), threaded=True)
    print(f"PORT {server.server_port}", flush=True)
    server.serve_forever()
