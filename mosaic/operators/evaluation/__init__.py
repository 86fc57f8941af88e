"""Evaluation files and the two modes that run them: Script mode (:mod:`.script`, seeded and
headless) and Manual mode (:mod:`.manual`, lock-step in a terminal)."""
