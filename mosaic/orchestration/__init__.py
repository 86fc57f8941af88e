"""Orchestration: Executor, RunGovernor (state machine), SimulationController."""
