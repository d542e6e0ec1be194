# Sourced by bench/dist's scripts: $py (python3 when it has torch, PyTorch
# 2.x here, else Debian's 1.13), free_port, and `gloo BYTES ITERS`, which
# prints rank 0's "microseconds version" of a 2-rank Gloo allreduce.
src=$(dirname "$0")
py=python3
[ -n "${quick:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
gloo() {
    port=$(free_port)
    "$py" "$src/gloo.py" 1 "$port" "$1" "$2" >/dev/null &
    pid=$!
    out=$(timeout 60 "$py" "$src/gloo.py" 0 "$port" "$1" "$2") || { kill "$pid" 2>/dev/null; exit 1; }
    wait "$pid"
    echo "$out"
}
