"""The well-known names of a run's parties: its orchestration components' uids (and in-process
endpoint names), and how a muscle's uid is made. Components check who sends them what by these."""

RUN_GOVERNOR = "run-governor"
SIMULATION_CONTROLLER = "simulation-controller"
ENVIRONMENT_CONDUCTOR = "environment-conductor"
AGENT_CONDUCTOR = "agent-conductor"


def muscle_uid(agent: str, environment: str) -> str:
    """The uid of ``agent``'s muscle in ``environment``."""
    return f"{agent}@{environment}"


def rollout_uid(environment: str, worker: int) -> str:
    """The uid of rollout worker ``worker`` (from 0) of ``environment``."""
    return f"{environment}/rollout-{worker}"
