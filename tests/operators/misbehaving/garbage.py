"""Answers the first command with a non-JSON line, the second with a reply missing fields, and
later ones with a correct pong (``stop`` still works, so the test ends quickly)."""
import json
import sys

for count, line in enumerate(sys.stdin.buffer):
    command = json.loads(line)
    if command.get("cmd") == "stop":
        break
    if count == 0:
        out = "hello, I am not JSON"
    elif count == 1:
        out = json.dumps({"type": "step", "id": command.get("id")})
    else:
        out = json.dumps({"type": "pong", "id": command.get("id")})
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
