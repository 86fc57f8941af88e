"""Ignores every command, EOF and SIGTERM: only SIGKILL ends it."""
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stderr.write("INFO stubborn: ready, ignoring SIGTERM\n")
sys.stderr.flush()
for _ in sys.stdin.buffer:
    pass
while True:
    time.sleep(0.05)
