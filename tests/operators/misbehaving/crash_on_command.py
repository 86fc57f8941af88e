"""Reads one command, writes a reason to stderr and exits with code 3."""
import sys

sys.stdin.buffer.readline()
sys.stderr.write("fatal: simulated crash while handling the command\n")
sys.stderr.flush()
sys.exit(3)
