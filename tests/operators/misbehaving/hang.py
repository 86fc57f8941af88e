"""Reads commands and never replies; ignores EOF (sleeps on); dies on SIGTERM as usual."""
import sys
import time

for _ in sys.stdin.buffer:
    pass
while True:
    time.sleep(0.05)
