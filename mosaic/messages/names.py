"""Well-known in-process endpoint names of a run's orchestration components."""

RUN_GOVERNOR = "run-governor"
SIMULATION_CONTROLLER = "simulation-controller"
ENVIRONMENT_CONDUCTOR = "environment-conductor"
AGENT_CONDUCTOR = "agent-conductor"


def muscle_uid(agent: str, environment: str) -> str:
    """The uid of ``agent``'s muscle in ``environment``."""
    return f"{agent}@{environment}"
