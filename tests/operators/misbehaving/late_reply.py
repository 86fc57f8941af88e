"""Answers every command with pong; the first answer comes after argv[1] seconds. With argv[2]
== "no-id" the replies carry no id (like workers that do not echo ids). Exits on ``stop``."""
import json
import sys
import time

delay = float(sys.argv[1])
echo_id = not (len(sys.argv) > 2 and sys.argv[2] == "no-id")
for count, line in enumerate(sys.stdin.buffer):
    command = json.loads(line)
    if command.get("cmd") == "stop":
        break
    if count == 0:
        time.sleep(delay)
    reply = {"type": "pong"}
    if echo_id and "id" in command:
        reply["id"] = command["id"]
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
