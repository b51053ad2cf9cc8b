#!/usr/bin/env bash
# Runs the scripted mongosh sessions (crud.js, fidelity.js) against a real `tide serve`
# process, as CI does: build tide, start it on a free loopback port, wait
# for it to answer, run the script, stop the server. Exits non-zero on any
# mismatch, or if mongosh is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v mongosh >/dev/null || { echo "mongosh is not on PATH (npm install -g mongosh)" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/tide" ./cmd/tide

# A free port: the kernel picks one for a throwaway listener.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
"$work/tide" serve --addr "127.0.0.1:$port" --log-level warn &
pid=$!

uri="mongodb://127.0.0.1:$port/?directConnection=true"
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || { echo "tide serve exited early" >&2; exit 1; }
	sleep 0.1
done

for script in crud.js fidelity.js; do
	MONGOSH_NO_TELEMETRY=1 DO_NOT_TRACK=1 mongosh "$uri" --quiet --norc --file "tests/mongosh/$script"
done
