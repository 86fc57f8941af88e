"""Naming runs: by uid, a unique uid prefix or integer id, and all the runs of an experiment."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import schema

__all__ = ["resolve_run", "select_runs"]


def resolve_run(conn: sa.Connection, run: str | int, where: str) -> int:
    """The id of the run named ``run`` in the store at ``where``.

    Raises StoreError naming the candidates if it matches several runs, or the latest runs if
    it matches none.
    """
    r = schema.runs
    if isinstance(run, int) and not isinstance(run, bool):
        found = conn.execute(sa.select(r.c.id).where(r.c.id == run)).scalar_one_or_none()
        if found is None:
            raise StoreError(f"no run with id {run} in {where}")
        return int(found)
    text = str(run)
    exact = conn.execute(sa.select(r.c.id).where(r.c.uid == text)).scalar_one_or_none()
    if exact is not None:
        return int(exact)
    candidates = (
        {
            row.id: row.uid
            for row in conn.execute(
                sa.select(r.c.id, r.c.uid)
                .where(sa.func.substr(r.c.uid, 1, len(text)) == text)
                .order_by(r.c.id)
                .limit(11)
            )
        }
        if text
        else {}
    )
    if text.isdigit():
        row = conn.execute(sa.select(r.c.id, r.c.uid).where(r.c.id == int(text))).one_or_none()
        if row is not None:
            candidates[row.id] = row.uid
    if len(candidates) == 1:
        return int(next(iter(candidates)))
    if not candidates:
        recent = conn.execute(sa.select(r.c.uid).order_by(r.c.id.desc()).limit(5)).scalars()
        hint = ", ".join(recent) or "the store holds no runs"
        raise StoreError(f"no run {text!r} in {where}: no uid starts with it (latest: {hint})")
    shown = ", ".join(f"{uid} (id {rid})" for rid, uid in sorted(candidates.items())[:10])
    more = " and more" if len(candidates) > 10 else ""
    raise StoreError(f"{text!r} matches several runs: {shown}{more}; give more of the uid")


def select_runs(
    conn: sa.Connection, runs: Sequence[str | int], experiment: str | None, where: str
) -> dict[int, str]:
    """The runs named in ``runs``, then those of experiment uid ``experiment``: id -> uid.

    Each run once, in the order named (an experiment's in the order they started). Raises
    StoreError for a run as :func:`resolve_run` does, for an experiment uid the store does not
    hold (naming those it does), and when nothing is named.
    """
    r, x = schema.runs, schema.experiments
    ids = [resolve_run(conn, run, where) for run in runs]
    if experiment is not None:
        found = conn.execute(
            sa.select(r.c.id).join(x, x.c.id == r.c.experiment_id)
            .where(x.c.uid == experiment).order_by(r.c.id)
        ).scalars().all()
        if not found:
            known = conn.execute(sa.select(x.c.uid).distinct().order_by(x.c.uid)).scalars().all()
            raise StoreError(
                f"no runs of experiment {experiment!r} in {where} "
                f"(experiments: {', '.join(known) or 'none'})"
            )
        ids += found
    if not ids:
        raise StoreError("no runs selected: name runs (uid, unique prefix or id) or an experiment")
    uids = {row.id: row.uid for row in conn.execute(sa.select(r.c.id, r.c.uid)
                                                     .where(r.c.id.in_(ids)))}
    return {run_id: uids[run_id] for run_id in dict.fromkeys(ids)}
